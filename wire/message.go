package wire

import (
	"bytes"
	"encoding/json"
	"errors"

	genschema "github.com/invopop/jsonschema"
)

// Part types.
const (
	PartText  = "text"
	PartImage = "image"
	PartFile  = "file"
)

// Message is user content: either plain text (a JSON string) or a list of
// parts (a JSON array). Exactly one of Text and Parts is meaningful: a
// non-nil Parts encodes as an array, otherwise Text encodes as a string.
type Message struct {
	Text  string
	Parts []Part
}

// Part is one piece of a multi-part message. A text part carries Text; an
// image or file part carries URL (and optionally MediaType and Name).
type Part struct {
	Type      string `json:"type" jsonschema:"enum=text,enum=image,enum=file"`
	Text      string `json:"text,omitempty"`
	URL       string `json:"url,omitempty" jsonschema:"maxLength=4096"`
	MediaType string `json:"mediaType,omitempty" jsonschema:"maxLength=255"`
	Name      string `json:"name,omitempty" jsonschema:"maxLength=255"`
}

// TextMessage returns a plain-text message.
func TextMessage(s string) *Message { return &Message{Text: s} }

// MarshalJSON encodes a string or an array of parts.
func (m Message) MarshalJSON() ([]byte, error) {
	if m.Parts != nil {
		return json.Marshal(m.Parts)
	}
	return json.Marshal(m.Text)
}

// UnmarshalJSON accepts a string or an array of parts.
func (m *Message) UnmarshalJSON(b []byte) error {
	b = bytes.TrimSpace(b)
	switch {
	case len(b) > 0 && b[0] == '"':
		*m = Message{}
		return json.Unmarshal(b, &m.Text)
	case len(b) > 0 && b[0] == '[':
		var parts []Part
		if err := unmarshalStrict(b, &parts); err != nil {
			return err
		}
		*m = Message{Parts: parts}
		return nil
	}
	return errors.New("wire: message must be a string or an array of parts")
}

// JSONSchema declares the union; invopop cannot derive it from the struct.
func (Message) JSONSchema() *genschema.Schema {
	one := uint64(1)
	return &genschema.Schema{OneOf: []*genschema.Schema{
		{Type: "string"},
		{Type: "array", MinItems: &one, Items: inlineSchema(Part{})},
	}}
}

func (m *Message) texts() []string {
	if m.Parts == nil {
		if m.Text == "" {
			return nil
		}
		return []string{m.Text}
	}
	var out []string
	for _, p := range m.Parts {
		if p.Type == PartText && p.Text != "" {
			out = append(out, p.Text)
		}
	}
	return out
}

func (m *Message) validate() error {
	if m.Parts == nil {
		return nil
	}
	if m.Text != "" {
		return errors.New("message has both text and parts")
	}
	if len(m.Parts) == 0 {
		return errors.New("message parts are empty")
	}
	for _, p := range m.Parts {
		if err := p.validate(); err != nil {
			return err
		}
	}
	return nil
}

func (p Part) validate() error {
	switch p.Type {
	case PartText:
		if p.Text == "" || p.URL != "" {
			return errors.New("a text part carries text and no url")
		}
	case PartImage, PartFile:
		if p.URL == "" || p.Text != "" {
			return errors.New("an image or file part carries a url and no text")
		}
	default:
		return errors.New("unknown part type " + p.Type)
	}
	return errors.Join(maxRunes("url", p.URL, 4096), maxRunes("mediaType", p.MediaType, 255), maxRunes("name", p.Name, 255))
}
