package msgline

import (
	"bufio"
	"io"
	"strings"
	"testing"
)

func TestRead(t *testing.T) {
	long := strings.Repeat("x", 100)
	br := bufio.NewReaderSize(strings.NewReader("a\r\n"+long+"\nb\nlast"), 16)
	for _, want := range []struct {
		line    string
		tooLong bool
		err     error
	}{{"a", false, nil}, {"", true, nil}, {"b", false, nil}, {"last", false, io.EOF}} {
		line, tooLong, err := Read(br, 10)
		if string(line) != want.line || tooLong != want.tooLong || err != want.err {
			t.Errorf("Read = %q, %v, %v; want %q, %v, %v", line, tooLong, err, want.line, want.tooLong, want.err)
		}
	}
}
