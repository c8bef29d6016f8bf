// Package svgtest reads the SVG documents eosbench -plot writes, for tests.
package svgtest

import (
	"encoding/xml"
	"errors"
	"io"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"
)

// Texts decodes an SVG document to its end, checks that its root is svg
// and every element is closed, and counts the texts it shows.
func Texts(t testing.TB, r io.Reader) map[string]int {
	t.Helper()
	dec := xml.NewDecoder(r)
	texts := map[string]int{}
	root, depth, inText := "", 0, false
	for {
		tok, err := dec.Token()
		if errors.Is(err, io.EOF) {
			break
		}
		require.NoError(t, err)
		switch tok := tok.(type) {
		case xml.StartElement:
			if depth == 0 {
				root = tok.Name.Local
			}
			depth++
			inText = tok.Name.Local == "text"
		case xml.EndElement:
			depth--
			inText = false
		case xml.CharData:
			if inText {
				texts[strings.TrimSpace(string(tok))]++
			}
		}
	}
	require.Equal(t, "svg", root)
	require.Zero(t, depth, "every element closed")
	return texts
}
