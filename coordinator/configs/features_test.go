package configs

import (
	"maps"
	"testing"

	"github.com/samsa-broker/samsa/coordinator/metadata"
)

// TestLegacyFeatureLevels: a log without feature records is read at the levels the
// node keys of a build before feature levels gave.
func TestLegacyFeatureLevels(t *testing.T) {
	for _, tc := range []struct {
		static map[string]string
		want   map[string]int16
	}{
		{nil, map[string]int16{"metadata.version": 29, "transaction.version": 2, "group.version": 1, "share.version": 1, "streams.version": 1}},
		{map[string]string{"samsa.transaction.version": "0", "group.share.enable": "false", "group.coordinator.rebalance.protocols": "classic,consumer"},
			map[string]int16{"metadata.version": 29, "group.version": 1}},
		{map[string]string{"samsa.transaction.version": "1", "group.share.enable": "false", "group.coordinator.rebalance.protocols": "classic,share"},
			map[string]int16{"metadata.version": 29, "transaction.version": 1, "share.version": 1}},
	} {
		l := Layers{Static: tc.static}
		if got := LegacyFeatureLevels(l); !maps.Equal(got, tc.want) {
			t.Errorf("%v: %v, want %v", tc.static, got, tc.want)
		}
		// An image that holds levels wins over the keys.
		im, err := (&metadata.Image{}).Apply(&metadata.FeatureLevelRecord{Name: "metadata.version", Level: 33})
		if err != nil {
			t.Fatal(err)
		}
		if got := FinalizedLevels(im, l); !maps.Equal(got, map[string]int16{"metadata.version": 33}) {
			t.Errorf("recorded: %v", got)
		}
		if got := FinalizedLevels(&metadata.Image{}, l); !maps.Equal(got, tc.want) {
			t.Errorf("legacy image: %v", got)
		}
	}
}
