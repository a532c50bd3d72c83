package operations

import (
	"testing"

	"github.com/wincompat/wincompat/test/e2e/e2eutil"
)

// TestMain builds the wincompat binary once for the package's tests, unless WINCOMPAT_BINARY names one.
func TestMain(m *testing.M) { e2eutil.Main(m) }
