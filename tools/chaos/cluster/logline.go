package cluster

import (
	"encoding/json"
	"sort"
	"strings"
)

// FaultSwitchesMsg is the message a broker built with the samsa_faults tag logs at
// start-up when fault switches are on, with the key "switches" listing them
// (comma- or space-separated; "SAMSA_FAULT_SKIP_FDATASYNC" and "SKIP_FDATASYNC" are
// the same switch):
//
//	level=WARN msg="fault switches active" switches=SKIP_FDATASYNC,ACK_BEFORE_ISR
const FaultSwitchesMsg = "fault switches active"

// PowerLossCutPrefix starts the message with which a broker started with PowerLossKey
// reports what the journal cut back ("power-loss journal: cut the files back to what
// was synced", cut="{Undone:147 FilesCut:10 BytesLost:2621420}"); its keys are kept
// as they come.
const PowerLossCutPrefix = "power-loss journal"

// SplitSwitches normalizes a "switches" value: upper case, without the SAMSA_FAULT_
// prefix, sorted.
func SplitSwitches(s string) []string {
	var out []string
	for _, f := range strings.FieldsFunc(s, func(r rune) bool { return r == ',' || r == ' ' || r == '[' || r == ']' || r == '"' }) {
		f = strings.ToUpper(strings.TrimSpace(f))
		f = strings.TrimPrefix(f, "SAMSA_FAULT_")
		if i := strings.IndexByte(f, '='); i >= 0 {
			f = f[:i]
		}
		if f != "" {
			out = append(out, f)
		}
	}
	sort.Strings(out)
	return out
}

// ParseLogLine reads one line of slog output, text (logfmt: key=value, values quoted
// with Go escapes when they hold spaces) or JSON, into its keys. A line that is
// neither yields what could be read; it never fails.
func ParseLogLine(line string) map[string]string {
	out := map[string]string{}
	line = strings.TrimSpace(line)
	if strings.HasPrefix(line, "{") {
		var m map[string]any
		if json.Unmarshal([]byte(line), &m) == nil {
			for k, v := range m {
				switch x := v.(type) {
				case string:
					out[k] = x
				default:
					b, _ := json.Marshal(x)
					out[k] = string(b)
				}
			}
			return out
		}
	}
	for i := 0; i < len(line); {
		for i < len(line) && line[i] == ' ' {
			i++
		}
		j := i
		for j < len(line) && line[j] != '=' && line[j] != ' ' {
			j++
		}
		if j >= len(line) || line[j] != '=' {
			i = j + 1
			continue
		}
		key := line[i:j]
		j++
		var val string
		if j < len(line) && line[j] == '"' {
			k := j + 1
			var b strings.Builder
			for k < len(line) && line[k] != '"' {
				if line[k] == '\\' && k+1 < len(line) {
					k++
					switch line[k] {
					case 'n':
						b.WriteByte('\n')
					case 't':
						b.WriteByte('\t')
					default:
						b.WriteByte(line[k])
					}
				} else {
					b.WriteByte(line[k])
				}
				k++
			}
			val = b.String()
			j = k + 1
		} else {
			k := j
			for k < len(line) && line[k] != ' ' {
				k++
			}
			val = line[j:k]
			j = k
		}
		out[key] = val
		i = j
	}
	return out
}
