package remote

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net/http"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/credentials"
	"github.com/aws/aws-sdk-go-v2/service/s3"
	"github.com/aws/aws-sdk-go-v2/service/s3/types"
	"github.com/aws/smithy-go"
)

// awsStore is objectStore on github.com/aws/aws-sdk-go-v2/service/s3.
type awsStore struct {
	c        *s3.Client
	bucket   string
	partSize int64
	// uploads is the calls of an upload: they go through a transport
	// without the attempt timeout on the answer's headers, which a store
	// may send only once it has the whole body stored (the assembly of a
	// multipart upload takes a while). An attempt cut there is retried
	// while the first still completes: versitygw then answered the retry
	// 200 with the object not yet readable. Uploads are bounded by the call
	// timeout.
	uploads func(*s3.Options)
}

func newAWSStore(cfg *Config) (*awsStore, error) {
	o := s3.Options{
		Region:       cfg.Region,
		Credentials:  aws.NewCredentialsCache(credentials.NewStaticCredentialsProvider(cfg.AccessKeyID, cfg.SecretAccessKey, cfg.SessionToken)),
		UsePathStyle: cfg.PathStyle,
		HTTPClient:   &http.Client{Transport: newTransport(cfg)},
		// Checksums only where S3 requires them: a CRC of every body on top
		// of the signature's SHA-256 is not asked by S3-compatible servers.
		RequestChecksumCalculation: aws.RequestChecksumCalculationWhenRequired,
		ResponseChecksumValidation: aws.ResponseChecksumValidationWhenRequired,
		RetryMaxAttempts:           3,
	}
	if cfg.Endpoint != "" {
		o.BaseEndpoint = aws.String(cfg.Endpoint)
	}
	wt := newTransport(cfg)
	wt.ResponseHeaderTimeout = 0
	wc := &http.Client{Transport: wt}
	return &awsStore{c: s3.New(o), bucket: cfg.Bucket, partSize: cfg.PartSize, uploads: func(o *s3.Options) { o.HTTPClient = wc }}, nil
}

func (s *awsStore) put(ctx context.Context, key string, r io.ReaderAt, size int64) error {
	if size <= s.partSize {
		_, err := s.c.PutObject(ctx, &s3.PutObjectInput{
			Bucket: &s.bucket, Key: &key, Body: io.NewSectionReader(r, 0, size), ContentLength: &size,
			ContentType: aws.String("application/octet-stream"),
		}, s.uploads)
		return err
	}
	up, err := s.c.CreateMultipartUpload(ctx, &s3.CreateMultipartUploadInput{Bucket: &s.bucket, Key: &key, ContentType: aws.String("application/octet-stream")}, s.uploads)
	if err != nil {
		return err
	}
	var parts []types.CompletedPart
	for off, n := int64(0), int32(1); off < size; off, n = off+s.partSize, n+1 {
		l := min(s.partSize, size-off)
		p, err := s.c.UploadPart(ctx, &s3.UploadPartInput{
			Bucket: &s.bucket, Key: &key, UploadId: up.UploadId, PartNumber: aws.Int32(n),
			Body: io.NewSectionReader(r, off, l), ContentLength: aws.Int64(l),
		}, s.uploads)
		if err != nil {
			s.abort(key, up.UploadId)
			return err
		}
		parts = append(parts, types.CompletedPart{ETag: p.ETag, PartNumber: aws.Int32(n)})
	}
	_, err = s.c.CompleteMultipartUpload(ctx, &s3.CompleteMultipartUploadInput{
		Bucket: &s.bucket, Key: &key, UploadId: up.UploadId, MultipartUpload: &types.CompletedMultipartUpload{Parts: parts},
	}, s.uploads)
	if err != nil {
		s.abort(key, up.UploadId)
	}
	return err
}

// abort drops a failed multipart upload's parts (best effort: a store that
// keeps them anyway expires them by its lifecycle rules).
func (s *awsStore) abort(key string, id *string) {
	ctx, cancel := context.WithTimeout(context.Background(), defaultAttemptTimeout)
	defer cancel()
	_, _ = s.c.AbortMultipartUpload(ctx, &s3.AbortMultipartUploadInput{Bucket: &s.bucket, Key: &key, UploadId: id})
}

func (s *awsStore) get(ctx context.Context, key string, start, end int64) (io.ReadCloser, error) {
	in := &s3.GetObjectInput{Bucket: &s.bucket, Key: &key}
	if start > 0 || end >= 0 {
		r := fmt.Sprintf("bytes=%d-", start)
		if end >= 0 {
			r += fmt.Sprint(end)
		}
		in.Range = &r
	}
	out, err := s.c.GetObject(ctx, in)
	if err != nil {
		return nil, err
	}
	return out.Body, nil
}

func (s *awsStore) remove(ctx context.Context, key string) error {
	_, err := s.c.DeleteObject(ctx, &s3.DeleteObjectInput{Bucket: &s.bucket, Key: &key})
	return err
}

func (s *awsStore) codeOf(err error) string {
	var ae smithy.APIError
	if errors.As(err, &ae) {
		return ae.ErrorCode()
	}
	return ""
}
