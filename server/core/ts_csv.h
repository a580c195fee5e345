/*
 * ts_csv.h: reader for small comma-separated text tables, in particular the
 * "strain,stress" sample files that material fits (ts_fit.h) are made from.
 *
 * The format, kept deliberately narrow so that a mistake in a file is an
 * error rather than a silent misreading:
 *   - records are lines ending in "\n", "\r\n" or "\r"; a UTF-8 byte order
 *     mark at the very start is skipped;
 *   - '#' starts a comment that runs to the end of its line; lines that are
 *     empty, blank or only a comment are skipped;
 *   - fields are separated by ',' and trimmed of spaces and tabs; there is no
 *     quoting, so a field cannot contain ',' (a decimal comma is an error);
 *   - numbers are decimal: [+-]digits[.digits][(e|E)[+-]digits] (also ".5",
 *     "5."); "nan", "inf" and numbers beyond the double range are refused as
 *     not finite; hexadecimal floats and anything else are refused as not a
 *     number. Parsing uses strtod in the C locale, which tissued and
 *     tissuetool never change.
 * A sample file has two columns, strain (dimensionless engineering strain)
 * then stress (Pa), and an optional header line before the first sample whose
 * fields name them (the first must contain "strain", the second "stress",
 * case-insensitively; "stress,strain" is refused because the columns would be
 * read swapped).
 *
 * Limits (ts_csv_limits) bound the input size, the line length and the
 * number of records, so a hostile or mistaken file costs bounded memory and
 * time. Every error names the 1-based line it was found on.
 *
 * Return codes (server/core/ts_error.h): 0 on success, or
 *   TS_EINVAL   malformed content (wrong field count, not a number, empty
 *               field, NUL byte, missing samples, bad header) or bad argument
 *   TS_ENAN     a number is NaN or infinite (or overflows a double)
 *   TS_ETOOBIG  the input, a line or the record count is over its limit
 *   TS_EIO      the file cannot be opened or read
 *   TS_ENOMEM   out of memory
 * with a one-line message in the caller's buffer (err, errcap; may be NULL/0).
 *
 * No global state; every function is reentrant.
 */
#ifndef TS_CSV_H
#define TS_CSV_H

#include <stddef.h>
#include <stdint.h>

/* Size limits for one input. A zero field means "the default". */
typedef struct ts_csv_limits {
  size_t max_bytes;  /* whole input, bytes (default 4 MiB) */
  size_t max_line;   /* one line including its comment, bytes (default 1024) */
  uint32_t max_rows; /* data records (default 20000) */
} ts_csv_limits;

#define TS_CSV_DEFAULT_MAX_BYTES ((size_t)4 << 20)
#define TS_CSV_DEFAULT_MAX_LINE ((size_t)1024)
#define TS_CSV_DEFAULT_MAX_ROWS 20000u

/* The default limits. */
ts_csv_limits ts_csv_default_limits(void);

/* ---- generic records ----------------------------------------------------- */

/* One field: a slice of the input (not NUL-terminated), already trimmed. */
typedef struct ts_csv_field {
  const char *p;
  size_t len;
} ts_csv_field;

/* Cursor over a buffer of records. Initialise with ts_csv_reader_init. */
typedef struct ts_csv_reader {
  const char *p;   /* next unread byte */
  const char *end; /* one past the last byte */
  size_t max_line; /* bytes */
  uint32_t line;   /* 1-based line of the record last returned */
  uint32_t next;   /* line number of the byte at p */
} ts_csv_reader;

/* Starts reading buf[0..len) (buf need not be NUL-terminated; len 0 is an
 * empty input). max_line 0 means TS_CSV_DEFAULT_MAX_LINE. */
void ts_csv_reader_init(ts_csv_reader *r, const char *buf, size_t len, size_t max_line);

/* Reads the next record, skipping blank and comment lines: returns its field
 * count (>= 1; the first max_fields fields are stored in fields[], so the
 * caller can tell "too many" from the count), 0 at the end of the input, or
 * TS_EINVAL (an empty field, a NUL byte) or TS_ETOOBIG (line longer than
 * max_line) with a message naming the line. r->line is the record's line
 * number afterwards. */
int ts_csv_next(ts_csv_reader *r, ts_csv_field *fields, int max_fields, char *err, size_t errcap);

/* Parses a field as a decimal number: 0 with *out set, TS_EINVAL when it is
 * not a number in the syntax above, TS_ENAN when it is not finite. */
int ts_csv_parse_double(const ts_csv_field *f, double *out);

/* ---- strain,stress samples ------------------------------------------------ */

/* Samples read from a file, in file order. Owned arrays; ts_samples_free. */
typedef struct ts_samples {
  uint32_t n;     /* number of samples (>= 1 after a successful read) */
  double *strain; /* n values, dimensionless */
  double *stress; /* n values, Pa */
  uint32_t *line; /* n 1-based line numbers, for error messages */
} ts_samples;

/* Reads "strain,stress" samples from buf[0..len). lim may be NULL (the
 * defaults). On success returns 0 and fills *out (at least one sample; an
 * input without any is TS_EINVAL). On failure *out is empty and nothing
 * needs freeing. Codes as listed at the top of this file. */
int ts_csv_read_samples(const char *buf, size_t len, const ts_csv_limits *lim, ts_samples *out,
                        char *err, size_t errcap);

/* The same for a file (any readable file, pipes included; at most
 * lim->max_bytes are read). TS_EIO when it cannot be opened or read. */
int ts_csv_read_samples_file(const char *path, const ts_csv_limits *lim, ts_samples *out, char *err,
                             size_t errcap);

/* Releases the arrays (NULL and an empty set are fine) and empties *s. */
void ts_samples_free(ts_samples *s);

#endif
