package main

// samsa users: SCRAM credentials, the job of Kafka's kafka-configs.sh --entity-type
// users (DescribeUserScramCredentials 50, AlterUserScramCredentials 51).
//
//	samsa users list
//	samsa users describe --user U...
//	samsa users set --user U --mechanism SCRAM-SHA-256|SCRAM-SHA-512
//	      (--password P | --password-file F) [--iterations N]
//	samsa users create ...     (set's flags; refused if the credential exists)
//	samsa users delete --user U [--mechanism M]...
//
// set salts the password here, as Kafka's admin client does: a random 32-byte salt
// and PBKDF2 (HMAC of the mechanism's hash, --iterations rounds, default 4096, Kafka's
// bounds 4096..16384) give the salted password, and only the salt and the salted
// password go over the wire; the broker derives StoredKey and ServerKey from them and
// keeps no password. Nothing these commands print holds a secret: describe shows each
// user's mechanisms and iteration counts only. --password-file reads the password from
// the file's first line, which keeps it out of the process list.
//
// delete without --mechanism removes every credential the user has.

import (
	"bufio"
	"context"
	"crypto/pbkdf2"
	"crypto/rand"
	"crypto/sha256"
	"crypto/sha512"
	"errors"
	"fmt"
	"hash"
	"io"
	"os"
	"strings"
	"text/tabwriter"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kgo"
)

func init() {
	register("users", "SCRAM users: list, describe, set, create, delete", runUsers)
}

const usersUsage = `usage: samsa users <command> [flags]
  list                      users with SCRAM credentials, mechanisms, iterations
  describe                  --user U (repeatable): the same for these users
  set                       --user U --mechanism SCRAM-SHA-256|SCRAM-SHA-512
                            --password P (or --password-file F: its first line)
                            [--iterations N (4096..16384, default 4096)]: create
                            or replace the credential, salted here
  create                    as set, but refused if the user has a credential of
                            that mechanism
  delete                    --user U [--mechanism M (repeatable; default: all)]
common flags: --bootstrap-server host:port,... (default 127.0.0.1:9092),
  --command-config FILE (Kafka client properties), --timeout 30s`

// Kafka's bounds on SCRAM iterations (ScramMechanism.minIterations, maxIterations).
const (
	minScramIterations = 4096
	maxScramIterations = 16384
)

type usersOpts struct {
	users        repeated
	mechanisms   repeated
	password     string
	passwordFile string
	iterations   int
}

func runUsers(args []string) int { return usersMain(args, os.Stdout) }

// usersMain runs `samsa users` with its results on out.
func usersMain(args []string, out io.Writer) int {
	if len(args) == 0 || args[0] == "-h" || args[0] == "--help" || args[0] == "help" {
		fmt.Fprintln(os.Stderr, usersUsage)
		if len(args) == 0 {
			return 2
		}
		return 0
	}
	sub := args[0]
	a := newAdminCmd("users "+sub, usersUsage)
	var o usersOpts
	fs := a.fs
	fs.Var(&o.users, "user", "the user (repeatable for describe)")
	fs.Var(&o.mechanisms, "mechanism", "SCRAM-SHA-256 or SCRAM-SHA-512 (repeatable for delete)")
	fs.StringVar(&o.password, "password", "", "set: the password")
	fs.StringVar(&o.passwordFile, "password-file", "", "set: a file whose first line is the password")
	fs.IntVar(&o.iterations, "iterations", minScramIterations, "set: PBKDF2 iterations")
	pos, ok := a.parse(args[1:])
	if !ok {
		return 2
	}
	if len(pos) > 0 {
		fmt.Fprintf(os.Stderr, "samsa users %s: unexpected arguments %q\n", sub, pos)
		return 2
	}
	var f func(ctx context.Context, cl *kgo.Client, adm *kadm.Client) error
	switch sub {
	case "list":
		f = func(ctx context.Context, _ *kgo.Client, adm *kadm.Client) error {
			return usersDescribe(ctx, adm, out, nil)
		}
	case "describe":
		f = func(ctx context.Context, _ *kgo.Client, adm *kadm.Client) error {
			if len(o.users) == 0 {
				return errors.New("describe needs --user")
			}
			return usersDescribe(ctx, adm, out, o.users)
		}
	case "set":
		f = func(ctx context.Context, _ *kgo.Client, adm *kadm.Client) error {
			return usersSet(ctx, adm, out, &o, false)
		}
	case "create":
		f = func(ctx context.Context, _ *kgo.Client, adm *kadm.Client) error {
			return usersSet(ctx, adm, out, &o, true)
		}
	case "delete":
		f = func(ctx context.Context, _ *kgo.Client, adm *kadm.Client) error {
			return usersDelete(ctx, adm, out, &o)
		}
	default:
		fmt.Fprintf(os.Stderr, "samsa users: unknown command %q\n%s\n", sub, usersUsage)
		return 2
	}
	return a.run(f)
}

func parseMechanism(s string) (kadm.ScramMechanism, error) {
	switch strings.ToUpper(strings.TrimSpace(s)) {
	case "SCRAM-SHA-256":
		return kadm.ScramSha256, nil
	case "SCRAM-SHA-512":
		return kadm.ScramSha512, nil
	}
	return 0, fmt.Errorf("--mechanism %q: want SCRAM-SHA-256 or SCRAM-SHA-512", s)
}

func usersDescribe(ctx context.Context, adm *kadm.Client, w io.Writer, users []string) error {
	described, err := adm.DescribeUserSCRAMs(ctx, users...)
	if err != nil {
		return err
	}
	tw := tabwriter.NewWriter(w, 0, 4, 2, ' ', 0)
	fmt.Fprintln(tw, "USER\tCREDENTIALS")
	var errs []error
	for _, d := range described.Sorted() {
		if d.Err != nil {
			errs = append(errs, fmt.Errorf("user %s: %w%s", d.User, d.Err, errMessage(&d.ErrMessage)))
			continue
		}
		creds := make([]string, len(d.CredInfos))
		for i, c := range d.CredInfos {
			creds[i] = c.String()
		}
		fmt.Fprintf(tw, "%s\t%s\n", d.User, orDash(strings.Join(creds, ",")))
	}
	if err := tw.Flush(); err != nil {
		return err
	}
	return errors.Join(errs...)
}

// readPassword is --password or the first line of --password-file.
func (o *usersOpts) readPassword() (string, error) {
	switch {
	case o.password != "" && o.passwordFile != "":
		return "", errors.New("give --password or --password-file, not both")
	case o.passwordFile != "":
		f, err := os.Open(o.passwordFile)
		if err != nil {
			return "", err
		}
		defer f.Close()
		sc := bufio.NewScanner(f)
		if !sc.Scan() {
			if err := sc.Err(); err != nil {
				return "", fmt.Errorf("--password-file: %w", err)
			}
			return "", errors.New("--password-file is empty")
		}
		return strings.TrimRight(sc.Text(), "\r"), nil
	}
	return o.password, nil
}

// saltPassword returns a random salt and the password salted with it (RFC 5802's
// SaltedPassword: PBKDF2 with HMAC of the mechanism's hash).
func saltPassword(m kadm.ScramMechanism, password string, iterations int) (salt, salted []byte, err error) {
	var h func() hash.Hash
	var size int
	switch m {
	case kadm.ScramSha256:
		h, size = sha256.New, sha256.Size
	case kadm.ScramSha512:
		h, size = sha512.New, sha512.Size
	default:
		return nil, nil, fmt.Errorf("mechanism %v", m)
	}
	salt = make([]byte, 32)
	if _, err := rand.Read(salt); err != nil {
		return nil, nil, err
	}
	salted, err = pbkdf2.Key(h, password, salt, iterations, size)
	return salt, salted, err
}

// usersSet sets (create: creates, refusing to replace) a user's credential.
func usersSet(ctx context.Context, adm *kadm.Client, w io.Writer, o *usersOpts, create bool) error {
	if len(o.users) != 1 || len(o.mechanisms) != 1 {
		return errors.New("set and create need one --user and one --mechanism")
	}
	m, err := parseMechanism(o.mechanisms[0])
	if err != nil {
		return err
	}
	if o.iterations < minScramIterations || o.iterations > maxScramIterations {
		return fmt.Errorf("--iterations %d: want %d..%d", o.iterations, minScramIterations, maxScramIterations)
	}
	password, err := o.readPassword()
	if err != nil {
		return err
	}
	if password == "" {
		return errors.New("set needs --password or --password-file")
	}
	salt, salted, err := saltPassword(m, password, o.iterations)
	if err != nil {
		return err
	}
	user := o.users[0]
	if create {
		// Not atomic with the change below: two creates at once may both pass.
		described, err := adm.DescribeUserSCRAMs(ctx, user)
		if err != nil {
			return err
		}
		for _, c := range described[user].CredInfos {
			if c.Mechanism == m {
				return fmt.Errorf("user %s has a %s credential already (set replaces it)", user, m)
			}
		}
	}
	altered, err := adm.AlterUserSCRAMs(ctx, nil, []kadm.UpsertSCRAM{{User: user, Mechanism: m, Iterations: int32(o.iterations), Salt: salt, SaltedPassword: salted}})
	if err != nil {
		return err
	}
	if a, ok := altered[user]; !ok {
		return fmt.Errorf("user %s: not in the answer", user)
	} else if a.Err != nil {
		return fmt.Errorf("user %s: %w%s", user, a.Err, errMessage(&a.ErrMessage))
	}
	fmt.Fprintf(w, "Set the %s credential of user %s (%d iterations).\n", m, user, o.iterations)
	return nil
}

func usersDelete(ctx context.Context, adm *kadm.Client, w io.Writer, o *usersOpts) error {
	if len(o.users) != 1 {
		return errors.New("delete needs one --user")
	}
	user := o.users[0]
	var mechs []kadm.ScramMechanism
	for _, s := range o.mechanisms {
		m, err := parseMechanism(s)
		if err != nil {
			return err
		}
		mechs = append(mechs, m)
	}
	if len(mechs) == 0 {
		described, err := adm.DescribeUserSCRAMs(ctx, user)
		if err != nil {
			return err
		}
		d := described[user]
		if d.Err != nil {
			return fmt.Errorf("user %s: %w%s", user, d.Err, errMessage(&d.ErrMessage))
		}
		for _, c := range d.CredInfos {
			mechs = append(mechs, c.Mechanism)
		}
		if len(mechs) == 0 {
			return fmt.Errorf("user %s has no SCRAM credential", user)
		}
	}
	var errs []error
	for _, m := range mechs {
		// One request per mechanism: Kafka refuses two alterations of one user in a
		// request with DUPLICATE_RESOURCE.
		altered, err := adm.AlterUserSCRAMs(ctx, []kadm.DeleteSCRAM{{User: user, Mechanism: m}}, nil)
		if err == nil {
			if a, ok := altered[user]; !ok {
				err = errors.New("not in the answer")
			} else if a.Err != nil {
				err = fmt.Errorf("%w%s", a.Err, errMessage(&a.ErrMessage))
			}
		}
		if err != nil {
			errs = append(errs, fmt.Errorf("user %s, %s: %w", user, m, err))
			continue
		}
		fmt.Fprintf(w, "Deleted the %s credential of user %s.\n", m, user)
	}
	return errors.Join(errs...)
}
