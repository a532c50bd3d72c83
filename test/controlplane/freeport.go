package controlplane

import (
	"fmt"
	"math/rand/v2"
	"net"
	"os"
	"strconv"
	"strings"
)

// FreePort returns a loopback TCP port nobody listens on yet, below the kernel's ephemeral range. A
// port the kernel hands out for "listen on :0" is also one it hands out as the source port of an
// outgoing connection: a test that stops a server and starts it again on the same port (a replica
// killed and restarted) then finds it taken by some client's connection, one run in many, while the
// e2e packages run side by side. Below the range, only another listener can take it.
func FreePort() (int, error) {
	low := ephemeralLow()
	const span = 12000
	first := max(1024, low-span)
	for range 200 {
		port := first + rand.IntN(low-first)
		l, err := net.Listen("tcp", net.JoinHostPort("127.0.0.1", strconv.Itoa(port)))
		if err != nil {
			continue // taken: try another
		}
		_ = l.Close()
		return port, nil
	}
	return 0, fmt.Errorf("no free loopback port between %d and %d", first, low-1)
}

// ephemeralLow is the first port of the kernel's ephemeral range (Linux's
// net.ipv4.ip_local_port_range), or the IANA range's 49152 where it cannot be read.
func ephemeralLow() int {
	b, err := os.ReadFile("/proc/sys/net/ipv4/ip_local_port_range")
	if err != nil {
		return 49152
	}
	fields := strings.Fields(string(b))
	if len(fields) == 0 {
		return 49152
	}
	low, err := strconv.Atoi(fields[0])
	if err != nil || low <= 1024 {
		return 49152
	}
	return low
}
