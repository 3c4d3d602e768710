// Package msgline reads newline-delimited messages (MCP over stdio) under a bound: a line longer
// than the bound is read to its end and dropped, never kept in memory.
package msgline

import (
	"bufio"
	"bytes"
	"errors"
)

// Read reads the next line from br without its newline (and a \r before it). A line longer than
// limit bytes is read to its end and not kept: Read returns nil and tooLong. At the end of the
// input the last line, if it has no newline, comes with io.EOF.
func Read(br *bufio.Reader, limit int64) (line []byte, tooLong bool, err error) {
	for {
		chunk, err := br.ReadSlice('\n')
		if !tooLong {
			if int64(len(line)+len(chunk)) > limit+2 { // room for \r\n
				tooLong, line = true, nil
			} else {
				line = append(line, chunk...)
			}
		}
		if errors.Is(err, bufio.ErrBufferFull) {
			continue
		}
		if tooLong {
			return nil, true, err
		}
		line = bytes.TrimSuffix(line, []byte("\n"))
		return bytes.TrimSuffix(line, []byte("\r")), false, err
	}
}
