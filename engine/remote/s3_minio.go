package remote

import (
	"context"
	"fmt"
	"io"
	"net/url"

	"github.com/minio/minio-go/v7"
	"github.com/minio/minio-go/v7/pkg/credentials"
)

// minioStore is objectStore on github.com/minio/minio-go/v7.
type minioStore struct {
	core     minio.Core
	bucket   string
	partSize int64
}

func newMinioStore(cfg *Config) (*minioStore, error) {
	host, secure := "s3.amazonaws.com", true
	if cfg.Endpoint != "" {
		u, err := url.Parse(cfg.Endpoint)
		if err != nil {
			return nil, fmt.Errorf("%w: endpoint %q: %v", ErrConfig, cfg.Endpoint, err)
		}
		host, secure = u.Host, u.Scheme == "https"
	}
	lookup := minio.BucketLookupDNS
	if cfg.PathStyle {
		lookup = minio.BucketLookupPath
	}
	c, err := minio.New(host, &minio.Options{
		Creds:        credentials.NewStaticV4(cfg.AccessKeyID, cfg.SecretAccessKey, cfg.SessionToken),
		Secure:       secure,
		Region:       cfg.Region,
		BucketLookup: lookup,
		Transport:    newTransport(cfg),
		MaxRetries:   3,
	})
	if err != nil {
		return nil, fmt.Errorf("%w: %v", ErrConfig, err)
	}
	return &minioStore{core: minio.Core{Client: c}, bucket: cfg.Bucket, partSize: cfg.PartSize}, nil
}

func (s *minioStore) put(ctx context.Context, key string, r io.ReaderAt, size int64) error {
	_, err := s.core.Client.PutObject(ctx, s.bucket, key, io.NewSectionReader(r, 0, size), size, minio.PutObjectOptions{
		PartSize:    uint64(s.partSize),
		ContentType: "application/octet-stream",
	})
	return err
}

func (s *minioStore) get(ctx context.Context, key string, start, end int64) (io.ReadCloser, error) {
	var opts minio.GetObjectOptions
	if start > 0 || end >= 0 {
		if err := opts.SetRange(start, end); err != nil {
			return nil, err
		}
	}
	body, _, _, err := s.core.GetObject(ctx, s.bucket, key, opts)
	return body, err
}

func (s *minioStore) remove(ctx context.Context, key string) error {
	return s.core.Client.RemoveObject(ctx, s.bucket, key, minio.RemoveObjectOptions{})
}

func (s *minioStore) codeOf(err error) string { return minio.ToErrorResponse(err).Code }
