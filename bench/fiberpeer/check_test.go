package main

import (
	"bytes"
	"context"
	"net"
	"os"
	"testing"
	"time"
)

func TestMain(m *testing.M) {
	if os.Getenv(instanceEnv) == "1" {
		main()
		os.Exit(0)
	}
	os.Exit(m.Run())
}

// TestCheck runs the check on a few pairs: the facts it reports that do
// not depend on timing hold.
func TestCheck(t *testing.T) {
	for _, addr := range []string{"127.0.0.1:5432", "127.0.0.1:6379"} {
		c, err := net.DialTimeout("tcp", addr, time.Second)
		if err != nil {
			t.Skipf("needs PostgreSQL and Redis on 127.0.0.1: %v", err)
		}
		c.Close()
	}
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	var out bytes.Buffer
	if err := runCheck(ctx, config{dbURL: os.Getenv("DATABASE_URL"), redisAddr: "127.0.0.1:6379"}, 5, &out); err != nil {
		t.Fatal(err)
	}
	t.Log(out.String())
	for _, want := range []string{
		"another body: 201, replayed=true, the first request's body=true; rows inserted for the second body: 0",
		"on one instance: 0 inserted twice",
		"1 row(s); the retry with the same key: replayed=false, 2 row(s) after it",
	} {
		if !bytes.Contains(out.Bytes(), []byte(want)) {
			t.Errorf("no %q in\n%s", want, out.String())
		}
	}
}
