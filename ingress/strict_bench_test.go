package ingress

import "testing"

// BenchmarkParseDelivery is the strict parse of a delivery request body
// (strictObject, decodeStrict and the checks of ParseDelivery), the
// ingress's share of a command before it is published.
func BenchmarkParseDelivery(b *testing.B) {
	body := []byte(`{"alias":"a","payloads":[{"message":"x","context":["c"],"ext":{"slack":{"ts":"1"}}}],"caller":"bob","idempotencyKey":"k"}`)
	for b.Loop() {
		if _, err := ParseDelivery(body, Limits{}); err != nil {
			b.Fatal(err)
		}
	}
}
