package postgres

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"regexp"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"
	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/retrystack/retrystack/idempotency"
	"github.com/retrystack/retrystack/internal/storekit"
)

// Store keeps idempotency keys in a table of a PostgreSQL database. It is
// safe for concurrent use.
type Store struct {
	pool *pgxpool.Pool
	sql  statements
}

var _ idempotency.Store = (*Store)(nil)

// statements are the store's SQL, for its table.
type statements struct {
	claim, read, complete, drop, expired string
}

// tableName is what New accepts as a table name: an identifier, with an
// optional schema.
var tableName = regexp.MustCompile(`^[A-Za-z_][A-Za-z0-9_]{0,62}(\.[A-Za-z_][A-Za-z0-9_]{0,62})?$`)

// New returns a store on pool in table (e.g. "idempotency_keys" or
// "orders.idempotency_keys"), which it creates if it does not exist.
func New(ctx context.Context, pool *pgxpool.Pool, table string) (*Store, error) {
	if pool == nil {
		return nil, errors.New("idempotency/postgres: a nil pool")
	}
	if !tableName.MatchString(table) {
		return nil, fmt.Errorf("idempotency/postgres: table %q is not an identifier ([schema.]name of letters, digits and _)", table)
	}
	t := table // an identifier by the check above: quoting it would make it case-sensitive
	s := &Store{pool: pool, sql: statements{
		// A new claim, or one over a record or claim whose time ended.
		claim: `INSERT INTO ` + t + ` (key, fp, token, done, expires) VALUES ($1, $2, $3, false, now() + $4 * interval '1 millisecond')
			ON CONFLICT (key) DO UPDATE SET fp = EXCLUDED.fp, token = EXCLUDED.token, done = false, expires = EXCLUDED.expires,
				status = NULL, header = NULL, body = NULL, body_kept = NULL
			WHERE ` + t + `.expires <= now()
			RETURNING true`,
		read: `SELECT fp, done, expires > now(), status, header, body, body_kept FROM ` + t + ` WHERE key = $1`,
		// The record, unless another claim holds the key.
		complete: `INSERT INTO ` + t + ` (key, fp, token, done, expires, status, header, body, body_kept)
			VALUES ($1, $2, $3, true, now() + $4 * interval '1 millisecond', $5, $6, $7, $8)
			ON CONFLICT (key) DO UPDATE SET done = true, expires = EXCLUDED.expires, status = EXCLUDED.status,
				header = EXCLUDED.header, body = EXCLUDED.body, body_kept = EXCLUDED.body_kept
			WHERE ` + t + `.token = EXCLUDED.token`,
		drop:    `DELETE FROM ` + t + ` WHERE key = $1 AND token = $2 AND NOT done`,
		expired: `DELETE FROM ` + t + ` WHERE expires <= now()`,
	}}
	_, err := pool.Exec(ctx, `CREATE TABLE IF NOT EXISTS `+t+` (
		key       text PRIMARY KEY,
		fp        text NOT NULL,
		token     text NOT NULL,
		done      boolean NOT NULL,
		expires   timestamptz NOT NULL,
		status    integer,
		header    jsonb,
		body      bytea,
		body_kept boolean
	)`)
	if err != nil {
		return nil, fmt.Errorf("idempotency/postgres: creating %s: %w", t, err)
	}
	return s, nil
}

// DeleteExpired deletes the records and claims whose keep or lease has
// ended, and returns how many: run it now and then (their keys are free
// already; this returns their space).
func (s *Store) DeleteExpired(ctx context.Context) (int64, error) {
	tag, err := s.pool.Exec(ctx, s.sql.expired)
	if err != nil {
		return 0, fmt.Errorf("idempotency/postgres: %w", err)
	}
	return tag.RowsAffected(), nil
}

// Begin claims key, then opens the transaction the handler writes in.
func (s *Store) Begin(ctx context.Context, key, fp string, lease time.Duration) (idempotency.Claim, *idempotency.Record, error) {
	token := storekit.Token()
	for range 3 { // a key claimed, then released, between the read and the claim is read again
		// A read first: a replay, or a request meeting one in flight,
		// writes nothing (no commit to wait for).
		var (
			heldFP       string
			done, live   bool
			status       *int32
			header, body []byte
			bodyKept     *bool
		)
		err := s.pool.QueryRow(ctx, s.sql.read, key).Scan(&heldFP, &done, &live, &status, &header, &body, &bodyKept)
		switch {
		case errors.Is(err, pgx.ErrNoRows), err == nil && !live:
			// Free: claimed below, unless another request claims it first.
		case err != nil:
			return nil, nil, fmt.Errorf("idempotency/postgres: %w", err)
		case heldFP != fp:
			return nil, nil, idempotency.ErrMismatch
		case !done:
			return nil, nil, idempotency.ErrInFlight
		default:
			rec := &idempotency.Record{Body: body}
			if status != nil {
				rec.Status = int(*status)
			}
			if bodyKept != nil {
				rec.BodyKept = *bodyKept
			}
			if len(header) > 0 {
				var enc map[string][][]byte
				if err := json.Unmarshal(header, &enc); err != nil {
					return nil, nil, fmt.Errorf("idempotency/postgres: the record of key %q: %w", key, err)
				}
				rec.Header = storekit.DecodeHeader(enc)
			}
			return nil, rec, nil
		}
		// The claim commits without waiting for its WAL flush: if the
		// database loses it in a crash, it lost every later commit too
		// (the WAL is one sequence), the handler's among them, so the key
		// is rightly free. One flush per write, the handler's commit.
		var claimed bool
		batch := &pgx.Batch{}
		batch.Queue(`BEGIN`)
		batch.Queue(`SET LOCAL synchronous_commit = off`)
		batch.Queue(s.sql.claim, key, fp, token, max(lease.Milliseconds(), 1)).QueryRow(func(row pgx.Row) error { return row.Scan(&claimed) })
		batch.Queue(`COMMIT`)
		err = s.pool.SendBatch(ctx, batch).Close()
		if errors.Is(err, pgx.ErrNoRows) {
			continue // another request claimed it since the read
		}
		if err != nil {
			return nil, nil, fmt.Errorf("idempotency/postgres: %w", err)
		}
		tx, err := s.pool.Begin(ctx)
		if err != nil {
			s.pool.Exec(context.WithoutCancel(ctx), s.sql.drop, key, token)
			return nil, nil, fmt.Errorf("idempotency/postgres: %w", err)
		}
		return &claim{s: s, tx: &handlerTx{Tx: tx}, key: key, fp: fp, token: token}, nil, nil
	}
	return nil, nil, fmt.Errorf("idempotency/postgres: key %q: claimed by others three times over", key)
}

// claim is a request's hold on its key, named by a random token, and the
// transaction its handler writes in.
type claim struct {
	s              *Store
	tx             *handlerTx
	key, fp, token string
}

type txKey struct{}

// Tx returns the transaction of the keyed request ctx belongs to, inside
// idempotency.Handler with this store: write the request's effects
// through it, and do not commit it (the handler's answer and the record
// commit with them once the handler returns). Rolling it back undoes them
// and leaves no record.
func Tx(ctx context.Context) (pgx.Tx, bool) {
	tx, ok := ctx.Value(txKey{}).(*handlerTx)
	return tx, ok
}

func (c *claim) Context(ctx context.Context) context.Context {
	return context.WithValue(ctx, txKey{}, c.tx)
}

// errHandlerCommit is what a handler that commits the transaction itself
// gets: the record must commit with its writes.
var errHandlerCommit = errors.New("idempotency/postgres: the handler's transaction commits with its record, once the handler returns: do not commit it")

// handlerTx is the transaction as the handler sees it: it cannot commit
// it, and a rollback is noted.
type handlerTx struct {
	pgx.Tx
	rolledBack bool
}

func (t *handlerTx) Commit(context.Context) error { return errHandlerCommit }

func (t *handlerTx) Rollback(ctx context.Context) error {
	t.rolledBack = true
	return t.Tx.Rollback(ctx)
}

// Commits tells idempotency.Handler that Complete commits the handler's
// writes: the answer is held until then.
func (c *claim) Commits() bool { return true }

func (c *claim) Complete(ctx context.Context, rec *idempotency.Record, keep time.Duration) error {
	if c.tx.rolledBack || rec.Status >= 500 {
		// The handler undid its writes, or failed (a 5xx): nothing is
		// committed and nothing kept, so a retry runs it again. Unlike a
		// store that cannot undo the effect, this one knows it did not
		// happen.
		c.tx.Tx.Rollback(ctx)
		return c.drop(ctx)
	}
	header, _ := json.Marshal(storekit.EncodeHeader(rec.Header))
	tag, err := c.tx.Tx.Exec(ctx, c.s.sql.complete, c.key, c.fp, c.token, max(keep.Milliseconds(), 1), rec.Status, header, rec.Body, rec.BodyKept)
	if pgErr, ok := errors.AsType[*pgconn.PgError](err); ok && pgErr.Code == "25P02" {
		// A statement of the handler's failed, which aborted the
		// transaction: none of its writes can commit.
		c.tx.Tx.Rollback(ctx)
		if rec.Status < 400 {
			// It answered a success over writes that failed: not to be
			// believed, nor kept.
			c.drop(ctx)
			return fmt.Errorf("%w: the handler answered %d, but a statement of its transaction failed", idempotency.ErrNotCommitted, rec.Status)
		}
		// Its refusal (a conflict it found by its failed insert) is its
		// answer, and is kept, alone.
		tag, err = c.s.pool.Exec(ctx, c.s.sql.complete, c.key, c.fp, c.token, max(keep.Milliseconds(), 1), rec.Status, header, rec.Body, rec.BodyKept)
		switch {
		case err != nil:
			c.drop(ctx)
			return fmt.Errorf("idempotency/postgres: %w", err)
		case tag.RowsAffected() == 0:
			return idempotency.ErrInFlight
		}
		return nil
	}
	if err == nil && tag.RowsAffected() == 0 {
		// This claim's lease ended and another request holds the key:
		// its run is the one that counts, not this one's writes.
		err = idempotency.ErrInFlight
	}
	if err == nil {
		err = c.tx.Tx.Commit(ctx)
	}
	if err != nil {
		c.tx.Tx.Rollback(ctx)
		c.drop(ctx)
		return fmt.Errorf("%w: %w", idempotency.ErrNotCommitted, err)
	}
	return nil
}

func (c *claim) Release(ctx context.Context) error {
	c.tx.Tx.Rollback(ctx)
	return c.drop(ctx)
}

// drop deletes the claim if it is still this one's and holds no record.
func (c *claim) drop(ctx context.Context) error {
	if _, err := c.s.pool.Exec(ctx, c.s.sql.drop, c.key, c.token); err != nil {
		return fmt.Errorf("idempotency/postgres: %w", err)
	}
	return nil
}
