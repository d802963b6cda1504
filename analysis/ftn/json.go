package ftn

import "encoding/json"

func jsonUnquote(raw json.RawMessage, v any) error { return json.Unmarshal(raw, v) }
