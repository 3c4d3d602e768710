package guards

import (
	"encoding/json"
	"reflect"
	"strings"
	"testing"
)

func TestWalkerLeavesAndPaths(t *testing.T) {
	doc := `{"a":"x","b":{"c":["y",1,{"d":"z"}],"e":""},"f\"g":"q","h~/":"r","\u00e9":"s","n":[[["deep"]]],"m":-1.5e3}`
	var w walker
	if err := w.walk(doc); err != nil {
		t.Fatal(err)
	}
	var got []string
	for _, lf := range w.leaves {
		got = append(got, w.path(lf.seg)+"="+lf.text)
	}
	want := []string{"/a=x", "/b/c/0=y", "/b/c/2/d=z", `/f"g=q`, "/h~0~1=r", "/é=s", "/n/0/0/0=deep"}
	if !reflect.DeepEqual(got, want) {
		t.Errorf("leaves %q, want %q", got, want)
	}
	for _, lf := range w.leaves {
		var s string
		if err := json.Unmarshal([]byte(doc[lf.start:lf.end]), &s); err != nil || s != lf.text {
			t.Errorf("leaf offsets %d-%d do not hold %q", lf.start, lf.end, lf.text)
		}
	}
}

func TestWalkerDecodesLikeEncodingJSON(t *testing.T) {
	for _, lit := range []string{
		`"plain"`, `"tab\there"`, `"quote \" and backslash \\ and slash \/"`, `"\u00e9\u4e2d"`,
		`"\ud83e\udd16 robot"`, `"lone \ud800 surrogate"`, `"\b\f\n\r"`, `"ends with backslash \\"`,
	} {
		var w walker
		if err := w.walk(lit); err != nil {
			t.Errorf("%s: %v", lit, err)
			continue
		}
		var want string
		_ = json.Unmarshal([]byte(lit), &want)
		if len(w.leaves) != 1 || w.leaves[0].text != want || w.leaves[0].seg != -1 {
			t.Errorf("%s: leaves %+v, want %q", lit, w.leaves, want)
		}
	}
}

func TestWalkerRejectsBrokenJSON(t *testing.T) {
	for _, doc := range []string{
		``, `{`, `{"a"}`, `{"a":}`, `{"a":1,}`, `[1,]`, `[1 2]`, `"open`, `tru`, `{"a":"b"} x`,
		`"bad \x escape"`, `-`, `{1:2}`, strings.Repeat("[", maxDepth+1) + strings.Repeat("]", maxDepth+1),
	} {
		var w walker
		err := w.walk(doc)
		if err == nil {
			t.Errorf("%.40q: want an error", doc)
			continue
		}
		if !strings.HasPrefix(err.Error(), "the content is not valid JSON: ") {
			t.Errorf("%.40q: error %q", doc, err)
		}
	}
}
