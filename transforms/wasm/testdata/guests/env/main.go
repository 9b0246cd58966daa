//go:build wasip1

// env replaces each value with the environment variable it names ("ARG0":
// the first argument; "NOW": time.Now().UnixNano(); "LOG": prints a line to
// stdout and keeps the value).
package main

import (
	"fmt"
	"os"
	"strconv"
	"time"

	"github.com/sluicehq/sluice/transforms/wasm/testdata/guests/internal/guest"
)

func main() {
	guest.Map(func(r guest.Record) []guest.Record {
		switch v := string(r.Value); v {
		case "ARG0":
			r.Value = []byte(os.Args[0])
		case "NOW":
			r.Value = []byte(strconv.FormatInt(time.Now().UnixNano(), 10))
		case "LOG":
			fmt.Println("hello from the guest")
		case "DIR":
			_, err := os.ReadDir("/")
			r.Value = []byte(fmt.Sprint(err != nil))
		default:
			r.Value = []byte(os.Getenv(v))
		}
		return []guest.Record{r}
	})
}
