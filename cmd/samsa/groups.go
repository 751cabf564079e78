package main

// samsa groups: the jobs of Kafka's kafka-consumer-groups tool, over kadm.
//
//	samsa groups list          [--bootstrap-server H:P] [--state S]...
//	samsa groups describe GROUP [--bootstrap-server H:P]
//	samsa groups lag GROUP      [--bootstrap-server H:P]
//	samsa groups reset-offsets GROUP (--topic T[:P,P...]... | --all-topics)
//	      (--to-earliest | --to-latest | --to-offset N | --to-datetime T) [--execute]
//	samsa groups delete GROUP...
//
// reset-offsets prints the plan and changes nothing without --execute; like Kafka's
// tool it refuses while the group has members.

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"sort"
	"strconv"
	"strings"
	"text/tabwriter"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kgo"
)

func init() {
	register("groups", "consumer and share groups: list, describe, lag, reset-offsets, delete", runGroups)
}

const groupsUsage = `usage: samsa groups <command> [flags]
  list                      list groups (--state S to filter, repeatable)
  describe GROUP            members and assignments
  lag GROUP                 committed offset, end offset and lag per partition
  reset-offsets GROUP       --topic T[:P,...] | --all-topics, and one of
                            --to-earliest --to-latest --to-offset N --to-datetime T
                            (RFC 3339 or 2006-01-02T15:04:05.000); --execute to apply
  delete GROUP...           delete empty groups and their offsets
common flags: --bootstrap-server host:port (default 127.0.0.1:9092),
  --command-config FILE (Kafka client properties), --timeout 30s`

// repeated is a flag that may be given several times.
type repeated []string

func (m *repeated) String() string     { return strings.Join(*m, ",") }
func (m *repeated) Set(v string) error { *m = append(*m, v); return nil }

type groupsOpts struct {
	bootstrap  string
	config     string // --command-config: Kafka client properties (clientconfig.go)
	timeout    time.Duration
	states     repeated
	topics     repeated
	allTopics  bool
	earliest   bool
	latest     bool
	toOffset   int64
	toDatetime string
	execute    bool
}

func runGroups(args []string) int {
	if len(args) == 0 || args[0] == "-h" || args[0] == "--help" || args[0] == "help" {
		fmt.Fprintln(os.Stderr, groupsUsage)
		if len(args) == 0 {
			return 2
		}
		return 0
	}
	sub := args[0]
	var o groupsOpts
	fs := flag.NewFlagSet("groups "+sub, flag.ContinueOnError)
	fs.SetOutput(io.Discard)
	fs.StringVar(&o.bootstrap, "bootstrap-server", "127.0.0.1:9092", "a broker to connect to")
	fs.StringVar(&o.config, "command-config", "", "Kafka client properties: security.protocol, sasl.*, ssl.* (clientconfig.go)")
	fs.DurationVar(&o.timeout, "timeout", 30*time.Second, "how long the command may take")
	fs.Var(&o.states, "state", "list: only groups in this state (repeatable)")
	fs.Var(&o.topics, "topic", "reset-offsets: topic, or topic:p,p,... (repeatable)")
	fs.BoolVar(&o.allTopics, "all-topics", false, "reset-offsets: every topic the group committed")
	fs.BoolVar(&o.earliest, "to-earliest", false, "reset to the log start")
	fs.BoolVar(&o.latest, "to-latest", false, "reset to the log end")
	fs.Int64Var(&o.toOffset, "to-offset", -1, "reset to this offset")
	fs.StringVar(&o.toDatetime, "to-datetime", "", "reset to the first offset at or after this time")
	fs.BoolVar(&o.execute, "execute", false, "reset-offsets: apply (otherwise print the plan)")
	pos, err := parseInterleaved(fs, args[1:])
	if err != nil {
		fmt.Fprintf(os.Stderr, "samsa groups %s: %v\n%s\n", sub, err, groupsUsage)
		return 2
	}
	opts := []kgo.Opt{kgo.SeedBrokers(strings.Split(o.bootstrap, ",")...)}
	if o.config != "" {
		more, err := loadClientConfig(o.config, os.Stderr)
		if err != nil {
			fmt.Fprintf(os.Stderr, "samsa groups %s: %v\n", sub, err)
			return 1
		}
		opts = append(opts, more...)
	}
	cl, err := kgo.NewClient(opts...)
	if err != nil {
		fmt.Fprintln(os.Stderr, "samsa groups:", err)
		return 1
	}
	defer cl.Close()
	adm := kadm.NewClient(cl)
	ctx, cancel := context.WithTimeout(context.Background(), o.timeout)
	defer cancel()
	need := func(n int) error {
		if len(pos) < n {
			return fmt.Errorf("%s needs a group name", sub)
		}
		return nil
	}
	switch sub {
	case "list":
		err = groupsList(ctx, adm, os.Stdout, o.states)
	case "describe":
		if err = need(1); err == nil {
			err = groupsDescribe(ctx, adm, os.Stdout, pos[0])
		}
	case "lag":
		if err = need(1); err == nil {
			err = groupsLag(ctx, adm, os.Stdout, pos[0])
		}
	case "reset-offsets":
		if err = need(1); err == nil {
			err = groupsReset(ctx, adm, os.Stdout, pos[0], &o, time.Now())
		}
	case "delete":
		if err = need(1); err == nil {
			err = groupsDelete(ctx, adm, os.Stdout, pos)
		}
	default:
		fmt.Fprintf(os.Stderr, "samsa groups: unknown command %q\n%s\n", sub, groupsUsage)
		return 2
	}
	if err != nil {
		fmt.Fprintln(os.Stderr, "samsa groups "+sub+":", err)
		return 1
	}
	return 0
}

// parseInterleaved parses flags that may come before or after positional arguments.
func parseInterleaved(fs *flag.FlagSet, args []string) ([]string, error) {
	var pos []string
	for {
		if err := fs.Parse(args); err != nil {
			return nil, err
		}
		if fs.NArg() == 0 {
			return pos, nil
		}
		pos = append(pos, fs.Arg(0))
		args = fs.Args()[1:]
	}
}

func groupsList(ctx context.Context, adm *kadm.Client, w io.Writer, states []string) error {
	listed, err := adm.ListGroups(ctx, states...)
	if err != nil {
		return err
	}
	tw := tabwriter.NewWriter(w, 0, 4, 2, ' ', 0)
	fmt.Fprintln(tw, "GROUP\tTYPE\tSTATE\tPROTOCOL TYPE")
	for _, g := range listed.Sorted() {
		typ := g.GroupType
		if typ == "" {
			typ = "-"
		}
		fmt.Fprintf(tw, "%s\t%s\t%s\t%s\n", g.Group, typ, g.State, g.ProtocolType)
	}
	return tw.Flush()
}

func groupsDescribe(ctx context.Context, adm *kadm.Client, w io.Writer, group string) error {
	described, err := adm.DescribeGroups(ctx, group)
	if err != nil {
		return err
	}
	d, ok := described[group]
	if !ok {
		return fmt.Errorf("group %q not in the answer", group)
	}
	if errors.Is(d.Err, kerr.GroupIDNotFound) {
		// Not a classic group: a share group (KIP-932) has its own describe API.
		if sd, err := adm.DescribeShareGroups(ctx, group); err == nil && sd[group].Err == nil {
			return describeShareGroup(w, sd[group])
		}
	}
	if d.Err != nil {
		return d.Err
	}
	fmt.Fprintf(w, "group %s: state %s, protocol type %q, protocol %q, coordinator %d\n",
		d.Group, d.State, d.ProtocolType, d.Protocol, d.Coordinator.NodeID)
	tw := tabwriter.NewWriter(w, 0, 4, 2, ' ', 0)
	fmt.Fprintln(tw, "MEMBER\tINSTANCE\tCLIENT\tHOST\tASSIGNMENT")
	for _, m := range d.Members {
		inst := "-"
		if m.InstanceID != nil {
			inst = *m.InstanceID
		}
		fmt.Fprintf(tw, "%s\t%s\t%s\t%s\t%s\n", m.MemberID, inst, m.ClientID, m.ClientHost, formatAssignment(m))
	}
	return tw.Flush()
}

// describeShareGroup prints a share group: its epochs, assignor and members.
func describeShareGroup(w io.Writer, d kadm.DescribedShareGroup) error {
	fmt.Fprintf(w, "group %s: type share, state %s, group epoch %d, assignment epoch %d, assignor %q, coordinator %d\n",
		d.GroupID, d.GroupState, d.GroupEpoch, d.AssignmentEpoch, d.Assignor, d.Coordinator.NodeID)
	tw := tabwriter.NewWriter(w, 0, 4, 2, ' ', 0)
	fmt.Fprintln(tw, "MEMBER\tEPOCH\tCLIENT\tHOST\tASSIGNMENT")
	for _, m := range d.Members {
		var parts []string
		for _, tp := range m.Assignment.Sorted() {
			ps := make([]string, len(tp.Partitions))
			for i, p := range tp.Partitions {
				ps[i] = strconv.Itoa(int(p))
			}
			parts = append(parts, tp.Topic+":"+strings.Join(ps, ","))
		}
		as := strings.Join(parts, " ")
		if as == "" {
			as = "-"
		}
		fmt.Fprintf(tw, "%s\t%d\t%s\t%s\t%s\n", m.MemberID, m.MemberEpoch, m.ClientID, m.ClientHost, as)
	}
	return tw.Flush()
}

func formatAssignment(m kadm.DescribedGroupMember) string {
	ca, ok := m.Assigned.AsConsumer()
	if !ok {
		return "-"
	}
	var parts []string
	for _, t := range ca.Topics {
		ps := make([]string, len(t.Partitions))
		for i, p := range t.Partitions {
			ps[i] = strconv.Itoa(int(p))
		}
		parts = append(parts, t.Topic+":"+strings.Join(ps, ","))
	}
	sort.Strings(parts)
	if len(parts) == 0 {
		return "-"
	}
	return strings.Join(parts, " ")
}

func groupsLag(ctx context.Context, adm *kadm.Client, w io.Writer, group string) error {
	lags, err := adm.Lag(ctx, group)
	if err != nil {
		return err
	}
	l, ok := lags[group]
	if !ok {
		return fmt.Errorf("group %q not in the answer", group)
	}
	if err := l.Error(); err != nil {
		return err
	}
	tw := tabwriter.NewWriter(w, 0, 4, 2, ' ', 0)
	fmt.Fprintln(tw, "TOPIC\tPARTITION\tCURRENT-OFFSET\tLOG-END-OFFSET\tLAG\tMEMBER\tHOST\tCLIENT")
	for _, pl := range l.Lag.Sorted() {
		member, host, client := "-", "-", "-"
		if pl.Member != nil {
			member, host, client = pl.Member.MemberID, pl.Member.ClientHost, pl.Member.ClientID
		}
		cur := "-"
		if pl.Commit.At >= 0 {
			cur = strconv.FormatInt(pl.Commit.At, 10)
		}
		fmt.Fprintf(tw, "%s\t%d\t%s\t%d\t%d\t%s\t%s\t%s\n", pl.Topic, pl.Partition, cur, pl.End.Offset, pl.Lag, member, host, client)
	}
	fmt.Fprintf(tw, "total lag\t\t\t\t%d\n", l.Lag.Total())
	return tw.Flush()
}

// parseDatetime accepts RFC 3339 and Kafka's tool format (local time unless a zone
// is given).
func parseDatetime(s string) (time.Time, error) {
	for _, layout := range []string{time.RFC3339Nano, "2006-01-02T15:04:05.000Z07:00", "2006-01-02T15:04:05.000", "2006-01-02T15:04:05"} {
		if t, err := time.ParseInLocation(layout, s, time.Local); err == nil {
			return t, nil
		}
	}
	return time.Time{}, fmt.Errorf("cannot parse %q as a date-time (want RFC 3339 or 2006-01-02T15:04:05.000)", s)
}

func groupsReset(ctx context.Context, adm *kadm.Client, w io.Writer, group string, o *groupsOpts, now time.Time) error {
	modes := 0
	for _, set := range []bool{o.earliest, o.latest, o.toOffset >= 0, o.toDatetime != ""} {
		if set {
			modes++
		}
	}
	if modes != 1 {
		return errors.New("give exactly one of --to-earliest, --to-latest, --to-offset, --to-datetime")
	}
	if (len(o.topics) == 0) == !o.allTopics {
		return errors.New("give --topic (repeatable) or --all-topics")
	}
	described, err := adm.DescribeGroups(ctx, group)
	if err != nil {
		return err
	}
	if d := described[group]; d.State != "Empty" && d.State != "Dead" && d.State != "" {
		return fmt.Errorf("group %s is %s with %d members: offsets can only be reset while it is inactive", group, d.State, len(d.Members))
	}
	// which partitions
	want := map[string][]int32{} // nil slice: every partition
	if o.allTopics {
		committed, err := adm.FetchOffsets(ctx, group)
		if err != nil {
			return err
		}
		for t := range committed {
			want[t] = nil
		}
	}
	for _, spec := range o.topics {
		topic, ps, _ := strings.Cut(spec, ":")
		want[topic] = nil
		if ps == "" {
			continue
		}
		for _, p := range strings.Split(ps, ",") {
			n, err := strconv.ParseInt(strings.TrimSpace(p), 10, 32)
			if err != nil {
				return fmt.Errorf("bad partition %q in --topic %s", p, spec)
			}
			want[topic] = append(want[topic], int32(n))
		}
	}
	topics := make([]string, 0, len(want))
	for t := range want {
		topics = append(topics, t)
	}
	sort.Strings(topics)
	if len(topics) == 0 {
		return errors.New("the group has no committed offsets to reset")
	}
	var listed kadm.ListedOffsets
	switch {
	case o.earliest:
		listed, err = adm.ListStartOffsets(ctx, topics...)
	case o.latest:
		listed, err = adm.ListEndOffsets(ctx, topics...)
	case o.toDatetime != "":
		var at time.Time
		if at, err = parseDatetime(o.toDatetime); err == nil {
			listed, err = adm.ListOffsetsAfterMilli(ctx, at.UnixMilli(), topics...)
		}
	default:
		listed, err = adm.ListEndOffsets(ctx, topics...) // to learn the partitions
	}
	if err != nil {
		return err
	}
	if err := listed.Error(); err != nil {
		return err
	}
	plan := kadm.Offsets{}
	listed.Each(func(lo kadm.ListedOffset) {
		if ps := want[lo.Topic]; ps != nil && !containsPartition(ps, lo.Partition) {
			return
		}
		at := lo.Offset
		if o.toOffset >= 0 {
			at = o.toOffset
		}
		plan.Add(kadm.Offset{Topic: lo.Topic, Partition: lo.Partition, At: at, LeaderEpoch: -1})
	})
	tw := tabwriter.NewWriter(w, 0, 4, 2, ' ', 0)
	fmt.Fprintln(tw, "TOPIC\tPARTITION\tNEW-OFFSET")
	for _, of := range plan.Sorted() {
		fmt.Fprintf(tw, "%s\t%d\t%d\n", of.Topic, of.Partition, of.At)
	}
	if err := tw.Flush(); err != nil {
		return err
	}
	if !o.execute {
		fmt.Fprintln(w, "(dry run: add --execute to commit these offsets)")
		return nil
	}
	return adm.CommitAllOffsets(ctx, group, plan)
}

func containsPartition(ps []int32, p int32) bool {
	for _, x := range ps {
		if x == p {
			return true
		}
	}
	return false
}

func groupsDelete(ctx context.Context, adm *kadm.Client, w io.Writer, groups []string) error {
	resp, err := adm.DeleteGroups(ctx, groups...)
	if err != nil {
		return err
	}
	var errs []error
	for _, g := range groups {
		r, ok := resp[g]
		switch {
		case !ok:
			errs = append(errs, fmt.Errorf("group %q not in the answer", g))
		case r.Err != nil:
			errs = append(errs, fmt.Errorf("%s: %w", g, r.Err))
		default:
			fmt.Fprintf(w, "deleted %s\n", g)
		}
	}
	return errors.Join(errs...)
}
