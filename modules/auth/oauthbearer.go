package auth

import (
	"errors"

	"github.com/sluicehq/sluice/kernel"
)

// oauthState checks OAUTHBEARER tokens. (Placeholder: refuses every token.)
type oauthState struct{}

func (o *oauthState) provision(m *Module, ctx kernel.Context) error { return nil }

func (o *oauthState) start(conn *kernel.ConnInfo) (kernel.SASLExchange, error) {
	return nil, errors.New("OAUTHBEARER is not implemented yet")
}
