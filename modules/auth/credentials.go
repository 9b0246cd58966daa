package auth

import (
	"errors"

	"github.com/sluicehq/sluice/kernel"
)

// credState holds the SCRAM credentials and runs PLAIN and SCRAM exchanges.
// (Placeholder: refuses everyone.)
type credState struct{}

func (c *credState) provision(m *Module, ctx kernel.Context) error { return nil }

func (c *credState) apply(im *kernel.Image) {}

func (c *credState) startPlain(conn *kernel.ConnInfo) (kernel.SASLExchange, error) {
	return nil, errors.New("PLAIN is not implemented yet")
}

func (c *credState) startSCRAM(mechanism string, conn *kernel.ConnInfo) (kernel.SASLExchange, error) {
	return nil, errors.New("SCRAM is not implemented yet")
}

func (c *credState) checkPassword(user, password string) (kernel.Principal, bool) {
	return kernel.Principal{}, false
}
