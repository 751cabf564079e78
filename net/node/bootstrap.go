package node

import (
	"crypto/hmac"
	"crypto/sha256"
	"encoding/base64"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"strconv"
	"strings"

	"github.com/samsa-broker/samsa/coordinator/metadata"
)

// Bootstrap metadata: records a controller's metadata log starts with, written by
// `samsa storage format` (Kafka's kafka-storage.sh format) into the metadata
// directory's bootstrap.records, and put into the voter's first snapshot when its raft
// storage is created (quorum.Config.FormatRecords); a voter whose log exists ignores
// the file. They are the finalized feature levels (--release-version, --feature:
// bootstrap_features.go), then --add-scram's SCRAM credentials, so that the
// controller listener authenticates from the first start, before any client could
// create them.
//
// Every voter's first snapshot must be the same: format every controller with the
// same cluster id and the same --release-version, --feature and --add-scram arguments
// (Kafka asks the same of its bootstrap.checkpoint). So that the same arguments give the same credential, a
// credential without salt= gets its salt from HMAC-SHA-256 keyed by the cluster id
// over the mechanism and the user name (32 bytes, unique per cluster, mechanism and
// user, which is what a salt must be; Kafka draws a random one). Broker-only nodes
// take their metadata from the controllers and ignore --add-scram.

// BootstrapRecordsFile is the name of the bootstrap records in the metadata dir.
const BootstrapRecordsFile = "bootstrap.records"

// maxBootstrapSize bounds what is read of bootstrap.records.
const maxBootstrapSize = 16 << 20

// ParseAddScram parses one --add-scram argument, Kafka's syntax:
//
//	SCRAM-SHA-256=[name=alice,password=alice-secret]
//	SCRAM-SHA-512=[name=alice,iterations=8192,password="a,b"]
//	SCRAM-SHA-512=[name=alice,iterations=8192,salt="N3E=",saltedpassword="YCE="]
//
// (values may be in double quotes; salt and saltedpassword are base64; iterations
// 4096 by default, 4096 to 16384) into the credential record for cluster clusterID.
func ParseAddScram(arg, clusterID string) (metadata.Record, error) {
	bad := func(format string, a ...any) error {
		return fmt.Errorf("%w: --add-scram %q: %s", ErrConfig, arg, fmt.Sprintf(format, a...))
	}
	mechName, body, ok := strings.Cut(arg, "=")
	if !ok || !strings.HasPrefix(body, "[") || !strings.HasSuffix(body, "]") {
		return nil, bad("want MECHANISM=[name=...,password=...]")
	}
	mech, ok := metadata.ParseScramMechanism(strings.TrimSpace(mechName))
	if !ok {
		return nil, bad("unknown mechanism %q (SCRAM-SHA-256 or SCRAM-SHA-512)", mechName)
	}
	kv, err := parseScramFields(body[1 : len(body)-1])
	if err != nil {
		return nil, bad("%v", err)
	}
	name := kv["name"]
	if name == "" {
		return nil, bad("no name=")
	}
	iterations := 4096
	if v, ok := kv["iterations"]; ok {
		if iterations, err = strconv.Atoi(v); err != nil || iterations < metadata.ScramMinIterations || iterations > metadata.ScramMaxIterations {
			return nil, bad("iterations=%s: want %d to %d", v, metadata.ScramMinIterations, metadata.ScramMaxIterations)
		}
	}
	password, hasPassword := kv["password"]
	saltedB64, hasSalted := kv["saltedpassword"]
	saltB64, hasSalt := kv["salt"]
	var salt, salted []byte
	if hasSalt {
		if salt, err = base64.StdEncoding.DecodeString(saltB64); err != nil || len(salt) == 0 {
			return nil, bad("salt= is not base64")
		}
	}
	switch {
	case hasPassword == hasSalted:
		return nil, bad("give password= or saltedpassword= (with salt=), one of them")
	case hasSalted && !hasSalt:
		return nil, bad("saltedpassword= needs salt=")
	case hasSalted:
		if salted, err = base64.StdEncoding.DecodeString(saltedB64); err != nil {
			return nil, bad("saltedpassword= is not base64")
		}
	default:
		if !hasSalt {
			mac := hmac.New(sha256.New, []byte(clusterID))
			io.WriteString(mac, "samsa bootstrap scram salt\x00"+mech.String()+"\x00"+name)
			salt = mac.Sum(nil)
		}
		if salted, err = mech.SaltPassword(password, salt, iterations); err != nil {
			return nil, bad("%v", err)
		}
	}
	c, err := metadata.NewScramCredential(name, mech, salt, salted, int32(iterations))
	if err != nil {
		return nil, bad("%v", err)
	}
	return &metadata.UserScramCredentialRecord{ScramCredential: c}, nil
}

// parseScramFields splits key=value pairs separated by commas; a value may be in
// double quotes (then it may hold commas; \" and \\ are escapes).
func parseScramFields(s string) (map[string]string, error) {
	out := map[string]string{}
	for len(strings.TrimSpace(s)) > 0 {
		k, rest, ok := strings.Cut(s, "=")
		if !ok {
			return nil, fmt.Errorf("%q has no '='", s)
		}
		k = strings.ToLower(strings.TrimSpace(k))
		switch k {
		case "name", "password", "salt", "saltedpassword", "iterations":
		default:
			return nil, fmt.Errorf("unknown key %q (name, password, salt, saltedpassword, iterations)", k)
		}
		if _, dup := out[k]; dup {
			return nil, fmt.Errorf("%s= given twice", k)
		}
		var v string
		if strings.HasPrefix(rest, `"`) {
			var b strings.Builder
			i := 1
			for ; i < len(rest) && rest[i] != '"'; i++ {
				if rest[i] == '\\' && i+1 < len(rest) {
					i++
				}
				b.WriteByte(rest[i])
			}
			if i >= len(rest) {
				return nil, fmt.Errorf("%s=: unterminated quote", k)
			}
			v, rest = b.String(), rest[i+1:]
			if t := strings.TrimSpace(rest); t != "" && !strings.HasPrefix(t, ",") {
				return nil, fmt.Errorf("%s=: text after the closing quote", k)
			}
			rest = strings.TrimPrefix(strings.TrimSpace(rest), ",")
		} else {
			v, rest, _ = strings.Cut(rest, ",")
		}
		out[k], s = v, rest
	}
	return out, nil
}

// writeBootstrap writes recs into dir's bootstrap.records (one entry frame).
func writeBootstrap(dir string, recs []metadata.Record) error {
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return fmt.Errorf("%w: %w", ErrStorage, err)
	}
	// The credentials' keys are secrets of the server (whoever has StoredKey and
	// ServerKey can pose as it): readable by the node's user only.
	path := filepath.Join(dir, BootstrapRecordsFile)
	tmp := path + ".tmp"
	f, err := os.OpenFile(tmp, os.O_WRONLY|os.O_CREATE|os.O_TRUNC, 0o600)
	if err != nil {
		return fmt.Errorf("%w: %w", ErrStorage, err)
	}
	_, err = f.Write(metadata.EncodeEntry(nil, recs...))
	if err == nil {
		err = f.Sync()
	}
	if cerr := f.Close(); err == nil {
		err = cerr
	}
	if err == nil {
		err = os.Rename(tmp, path)
	}
	if err != nil {
		os.Remove(tmp)
		return fmt.Errorf("%w: %w", ErrStorage, err)
	}
	return syncDir(dir)
}

// ReadBootstrap reads dir's bootstrap records (none when the file does not exist).
func ReadBootstrap(dir string) ([]metadata.Record, error) {
	f, err := os.Open(filepath.Join(dir, BootstrapRecordsFile))
	if errors.Is(err, os.ErrNotExist) {
		return nil, nil
	}
	if err != nil {
		return nil, fmt.Errorf("%w: %w", ErrStorage, err)
	}
	defer f.Close()
	b, err := io.ReadAll(io.LimitReader(f, maxBootstrapSize+1))
	if err != nil {
		return nil, fmt.Errorf("%w: %w", ErrStorage, err)
	}
	if len(b) > maxBootstrapSize {
		return nil, fmt.Errorf("%w: %s is over %d bytes", ErrStorage, filepath.Join(dir, BootstrapRecordsFile), maxBootstrapSize)
	}
	recs, n, err := metadata.DecodeEntry(b)
	if err != nil || n != len(b) {
		return nil, fmt.Errorf("%w: %s: not a bootstrap records file (%v)", ErrStorage, filepath.Join(dir, BootstrapRecordsFile), err)
	}
	return recs, nil
}
