// Command kafkadoc generates coordinator/configs/kafka_keys_gen.go from Apache Kafka's
// generated configuration documentation, as the apache/kafka-site repository publishes
// it, one folder per release (41 is Kafka 4.1):
//
//	<site>/<folder>/generated/kafka_config.html   broker keys (KafkaConfig, remote log manager included)
//	<site>/<folder>/generated/topic_config.html   topic keys (LogConfig)
//
// Each key there is an <li> holding an <h4> with the key's name, a <p> with its
// documentation and a table of "Type", "Default", "Valid Values", "Importance", "Update
// Mode" (broker keys) and "Server Default Property" (topic keys). kafkadoc keeps every
// key of -version (the newest Kafka 4 release), the keys of the earlier Kafka 4
// releases of -also that it no longer has, and the topic keys of -legacy (the last
// Kafka 3 release) that Kafka 4 removed, with the broker keys that were their server
// default property; the keys of earlier releases are marked Removed (the release that
// removed them) and From (the release whose documentation they come from). It writes
// them as Go data (the package's KafkaKey); the package merges them with its
// hand-written Defs at init, the hand-written ones taking precedence.
//
// The simple forms of "Valid Values" become bounds or an enumeration: [a,...],
// [a,...,b], [x, y, z] ("(case insensitive) [...]" too; a version list also takes each
// version without its -IVn suffix, as Kafka 3's ApiVersionValidator did). The other
// forms (non-empty string, [1,...,9] or -1, ...) are kept as text, which the package
// checks at run time (validCheck). Defaults drop Kafka's
// unit note ("604800000 (7 days)"); null and no default become nil.
//
// Run it with `go generate` in coordinator/configs, with KAFKA_SITE set to a checkout
// of apache/kafka-site (`git clone https://github.com/apache/kafka-site`).
package main

import (
	"bytes"
	"flag"
	"fmt"
	"go/format"
	"html"
	"math"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"strconv"
	"strings"
)

// key is one parsed <li>.
type key struct {
	name, doc string
	rows      map[string]string // "Type" → "int", ...
}

var (
	reItem = regexp.MustCompile(`(?s)<li>\s*<h4><a id="([^"]+)"></a>.*?</h4>(.*?)<table><tbody>(.*?)</tbody></table>\s*</li>`)
	reRow  = regexp.MustCompile(`(?s)<tr><th>([^<]*):</th><td>(.*?)</td></tr>`)
	reTag  = regexp.MustCompile(`(?s)<[^>]*>`)
	reUnit = regexp.MustCompile(`^(-?[0-9]+) \([^)]*\)$`) // "604800000 (7 days)"
	reMin  = regexp.MustCompile(`^\[(-?[0-9.]+),\.\.\.\]$`)
	reBoth = regexp.MustCompile(`^\[(-?[0-9.]+),\.\.\.,(-?[0-9.]+)\]$`)
	reEnum = regexp.MustCompile(`^(\(case insensitive\) )?\[([^\[\]]+)\]$`)
	reIV   = regexp.MustCompile(`^([0-9]+\.[0-9]+(\.[0-9]+)?)-IV[0-9]+$`)
	space  = regexp.MustCompile(`\s+`)
)

func parse(path string) ([]key, error) {
	b, err := os.ReadFile(path)
	if err != nil {
		return nil, err
	}
	var out []key
	for _, m := range reItem.FindAllSubmatch(b, -1) {
		k := key{name: string(m[1]), doc: firstSentence(string(m[2])), rows: map[string]string{}}
		for _, r := range reRow.FindAllSubmatch(m[3], -1) {
			k.rows[string(r[1])] = strings.TrimSpace(html.UnescapeString(reTag.ReplaceAllString(string(r[2]), "")))
		}
		if k.rows["Type"] == "" {
			return nil, fmt.Errorf("%s: key %s has no type", path, k.name)
		}
		out = append(out, k)
	}
	if len(out) == 0 {
		return nil, fmt.Errorf("%s: no keys found", path)
	}
	return out, nil
}

// firstSentence is the documentation's first sentence, as plain text.
func firstSentence(h string) string {
	t := strings.TrimSpace(space.ReplaceAllString(html.UnescapeString(reTag.ReplaceAllString(h, " ")), " "))
	for i := 0; i < len(t); i++ {
		if t[i] != '.' || (i+1 < len(t) && t[i+1] != ' ') {
			continue
		}
		word := t[strings.LastIndexByte(t[:i], ' ')+1 : i]
		switch strings.ToLower(word) {
		case "e.g", "i.e", "etc", "vs", "ex":
			continue
		}
		return t[:i+1]
	}
	return t
}

var kinds = map[string]string{
	"int": "KindInt", "short": "KindShort", "long": "KindLong", "boolean": "KindBool", "double": "KindDouble",
	"list": "KindList", "password": "KindPassword", "class": "KindClass", "string": "KindString",
}

// defaultValue is Kafka's printed default as a Go *string expression: no default and
// null are nil, "" the empty string, a unit note ("604800000 (7 days)") dropped.
func defaultValue(s string) string {
	switch s {
	case "", "null":
		return "nil"
	case `""`:
		return `sp("")`
	}
	if m := reUnit.FindStringSubmatch(s); m != nil {
		s = m[1]
	}
	return "sp(" + strconv.Quote(s) + ")"
}

// bounds maps the simple forms of Kafka's "Valid Values": [a,...], [a,...,b] and
// [x, y, z]. Others (non-empty string, [1,...,9] or -1, ...) are left to validCheck.
func bounds(kind, valid string) (lo, hi, enum string) {
	lo = "noMin"
	num := func(s string) (string, bool) {
		if kind == "double" {
			f, err := strconv.ParseFloat(s, 64)
			if err != nil || f != math.Trunc(f) {
				return "", false // Def bounds are integers
			}
			return strconv.FormatInt(int64(f), 10), true
		}
		_, err := strconv.ParseInt(s, 10, 64)
		return s, err == nil
	}
	numeric := kind == "int" || kind == "short" || kind == "long" || kind == "double"
	switch {
	case numeric && reBoth.MatchString(valid):
		m := reBoth.FindStringSubmatch(valid)
		a, ok1 := num(m[1])
		b, ok2 := num(m[2])
		if ok1 && ok2 && b != "0" {
			return a, b, ""
		}
	case numeric && reMin.MatchString(valid):
		if a, ok := num(reMin.FindStringSubmatch(valid)[1]); ok {
			return a, "", ""
		}
	case !numeric && reEnum.MatchString(valid):
		items := strings.Split(reEnum.FindStringSubmatch(valid)[2], ",")
		var vals []string
		for _, it := range items {
			it = strings.TrimSpace(it)
			if kind == "list" {
				it = strings.ToLower(it) // Def.Validate compares list items in lower case
			}
			vals = append(vals, it)
			// Kafka 3's ApiVersionValidator also took a version without its IV suffix
			// (3.0 for 3.0-IV1).
			if m := reIV.FindStringSubmatch(it); m != nil && !slices.Contains(vals, m[1]) {
				vals = append(vals, m[1])
			}
		}
		q := make([]string, len(vals))
		for i, v := range vals {
			q[i] = strconv.Quote(v)
		}
		return lo, "", "[]string{" + strings.Join(q, ", ") + "}"
	}
	return lo, "", ""
}

var modes = map[string]string{"read-only": "ModeReadOnly", "per-broker": "ModePerBroker", "cluster-wide": "ModeClusterWide"}

func emit(w *bytes.Buffer, k key, topic bool, removed, release string) error {
	kind, ok := kinds[k.rows["Type"]]
	if !ok {
		return fmt.Errorf("key %s: unknown type %q", k.name, k.rows["Type"])
	}
	lo, hi, enum := bounds(k.rows["Type"], k.rows["Valid Values"])
	fmt.Fprintf(w, "{Name: %q, Kind: %s, Default: %s, Min: %s", k.name, kind, defaultValue(k.rows["Default"]), lo)
	if hi != "" {
		fmt.Fprintf(w, ", Max: %s", hi)
	}
	if enum != "" {
		fmt.Fprintf(w, ", Enum: %s", enum)
	}
	if v := k.rows["Valid Values"]; v != "" {
		fmt.Fprintf(w, ", Valid: %q", v)
	}
	fmt.Fprintf(w, ", Importance: %q", k.rows["Importance"])
	if topic {
		if s := k.rows["Server Default Property"]; s != "" && s != "null" {
			fmt.Fprintf(w, ", Synonym: %q", s)
		}
	} else {
		m, ok := modes[k.rows["Update Mode"]]
		if !ok {
			return fmt.Errorf("broker key %s: unknown update mode %q", k.name, k.rows["Update Mode"])
		}
		fmt.Fprintf(w, ", Mode: %s", m)
	}
	if removed != "" {
		fmt.Fprintf(w, ", Removed: %q, From: %q", removed, release)
	}
	fmt.Fprintf(w, ", Doc: %q},\n", k.doc)
	return nil
}

// release is a documentation folder's Kafka release: "41" → "4.1".
func release(folder string) string { return folder[:1] + "." + folder[1:] }

func run() error {
	site := flag.String("site", "", "a checkout of apache/kafka-site")
	version := flag.String("version", "41", "the documentation folder of the newest Kafka 4 release")
	also := flag.String("also", "40", "folders of earlier Kafka 4 releases (comma-separated): their keys the newest removed are kept")
	legacy := flag.String("legacy", "39", "the folder of the last Kafka 3 release, for the topic keys Kafka 4 removed")
	out := flag.String("o", "kafka_keys_gen.go", "output file")
	flag.Parse()
	if *site == "" {
		return fmt.Errorf("-site is empty: set KAFKA_SITE to a checkout of https://github.com/apache/kafka-site")
	}
	folders := append([]string{*version}, strings.Split(*also, ",")...)
	broker, topic, err := loadReleases(*site, folders)
	if err != nil {
		return err
	}
	broker, topic, err = addLegacy(*site, *legacy, release(folders[len(folders)-1]), broker, topic)
	if err != nil {
		return err
	}
	src, err := generate(folders, *legacy, *version, broker, topic)
	if err != nil {
		return err
	}
	return os.WriteFile(*out, src, 0o644)
}

// keyItem is a key with the release that removed it ("" if none) and the
// release whose documentation it was read from.
type keyItem struct {
	k                key
	removed, release string
}

// load parses the generated documentation file name of the release folder v.
func load(site, v, name string) ([]key, error) {
	return parse(filepath.Join(site, v, "generated", name))
}

func knownKey(items []keyItem, name string) bool {
	return slices.ContainsFunc(items, func(it keyItem) bool { return it.k.name == name })
}

// loadReleases reads the broker and topic keys of the newest release (the first
// folder), then those earlier Kafka 4 releases had and a later one removed
// (removed = the release after the last that had it).
func loadReleases(site string, folders []string) (broker, topic []keyItem, err error) {
	for i, v := range folders {
		b, err := load(site, v, "kafka_config.html")
		if err != nil {
			return nil, nil, err
		}
		t, err := load(site, v, "topic_config.html")
		if err != nil {
			return nil, nil, err
		}
		removed := ""
		if i > 0 {
			removed = release(folders[i-1])
		}
		for _, k := range b {
			if !knownKey(broker, k.name) {
				broker = append(broker, keyItem{k, removed, release(v)})
			}
		}
		for _, k := range t {
			if !knownKey(topic, k.name) {
				topic = append(topic, keyItem{k, removed, release(v)})
			}
		}
	}
	return broker, topic, nil
}

// addLegacy adds, from the last Kafka 3 release (folder legacy), its topic keys
// Kafka 4 (first4, its first release read) removed, and the broker keys that were
// their server default property.
func addLegacy(site, legacy, first4 string, broker, topic []keyItem) ([]keyItem, []keyItem, error) {
	oldTopic, err := load(site, legacy, "topic_config.html")
	if err != nil {
		return nil, nil, err
	}
	oldBroker, err := load(site, legacy, "kafka_config.html")
	if err != nil {
		return nil, nil, err
	}
	for _, k := range oldTopic {
		if knownKey(topic, k.name) {
			continue
		}
		topic = append(topic, keyItem{k, first4, release(legacy)})
		s := k.rows["Server Default Property"]
		if s == "" || s == "null" || knownKey(broker, s) || !slices.ContainsFunc(oldBroker, func(k key) bool { return k.name == s }) {
			continue
		}
		for _, b := range oldBroker {
			if b.name == s {
				broker = append(broker, keyItem{b, first4, release(legacy)})
			}
		}
	}
	return broker, topic, nil
}

// generate writes the Go source of kafkaBrokerKeys and kafkaTopicKeys, formatted.
func generate(folders []string, legacy, version string, broker, topic []keyItem) ([]byte, error) {
	var w bytes.Buffer
	fmt.Fprintf(&w, "// Code generated by internal/kafkadoc from kafka-site's generated/kafka_config.html and\n"+
		"// topic_config.html of %s (newest first), and the topic keys Kafka 4 removed from %s; DO NOT EDIT.\n\npackage configs\n\n",
		strings.Join(folders, ", "), legacy)
	fmt.Fprintf(&w, "// KafkaVersion is the newest Kafka release whose keys kafkaBrokerKeys and kafkaTopicKeys hold.\n"+
		"const KafkaVersion = %q\n\n", release(version))
	fmt.Fprintf(&w, "var kafkaBrokerKeys = []KafkaKey{\n")
	for _, it := range broker {
		if err := emit(&w, it.k, false, it.removed, it.release); err != nil {
			return nil, err
		}
	}
	fmt.Fprintf(&w, "}\n\nvar kafkaTopicKeys = []KafkaKey{\n")
	for _, it := range topic {
		if err := emit(&w, it.k, true, it.removed, it.release); err != nil {
			return nil, err
		}
	}
	fmt.Fprintf(&w, "}\n")
	src, err := format.Source(w.Bytes())
	if err != nil {
		return nil, fmt.Errorf("formatting: %w", err)
	}
	return src, nil
}

func main() {
	if err := run(); err != nil {
		fmt.Fprintln(os.Stderr, "kafkadoc:", err)
		os.Exit(1)
	}
}
