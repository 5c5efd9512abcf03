/* mrd_kinds_gen: the event-kind table (proto/kinds.table) into the code and the wire
 * messages that describe each kind. A host tool run by the build (proto/CMakeLists.txt) and
 * by tests/gpu/prepare_deps.sh; it links nothing of meridian.
 *
 *   mrd_kinds_gen TABLE TEMPLATE OUT_HEADER OUT_PROTO
 *
 * OUT_HEADER (kinds_table.h, included by proto/kinds.h): MRD_KINDS(X), one X(...) per kind,
 * and MRD__F_<fn>(F, K), one F(...) per field in the table's order (the SQL column order).
 * OUT_PROTO: TEMPLATE (proto/meridian.proto) with each marker line `// @kinds <part>`
 * replaced by what the table says of every kind: `columns`, its Columns message (fields in
 * wire-number order, the table's trailing comments beside them); `enum`, its EventKind
 * value; `batch`, its Batch field. Each marker stands in the template exactly once.
 *
 * A malformed table or template fails with `file:line: what is wrong` on stderr, exit
 * status 1, and no output left behind. Sizes: tens of kinds, hundreds of fields; every
 * limit below fails loudly when passed.
 */
#include <ctype.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define MAX_KINDS      64
#define MAX_FIELDS     64 /* per kind */
#define MAX_CELLS      12
#define MAX_LINE       1024
#define COMMENT_COLUMN 38 /* where trailing comments start in the generated proto */

/* the columns of a kind row and of a field row, in the table's order */
/* clang-format off */
enum { K_FN, K_VALUE, K_STRUCT, K_NAME, K_BATCH, K_NUMBER, K_MESSAGE, K_TABLE, K_TAG, K_SINCE,
       K_CELLS };
enum { F_MEMBER, F_COLUMN, F_CLASS, F_NUMBER, F_TYPE, F_WIRE, F_CODEC, F_ARG, F_POS, F_SEP,
       F_CELLS };
static const char *const kind_header[K_CELLS] = {"fn", "value", "struct", "name", "batch",
                                                 "number", "message", "table", "tag", "since"};
static const char *const field_header[F_CELLS] = {"member", "column", "class", "number", "type",
                                                  "wire", "codec", "arg", "pos", "sep"};
/* clang-format on */

struct row {
    char *cell[MAX_CELLS];
    char *comment; /* the trailing `# ...` text, or "" */
    int line;
};

struct kind {
    struct row row;
    struct row field[MAX_FIELDS];
    int nfields;
};

static struct kind kinds[MAX_KINDS];
static int nkinds;
static const char *table_path;
static const char *out_paths[2];

static void fail(const char *path, int line, const char *fmt, ...)
{
    va_list ap;
    fprintf(stderr, "%s:%d: ", path, line);
    va_start(ap, fmt);
    vfprintf(stderr, fmt, ap);
    va_end(ap);
    fputc('\n', stderr);
    for (int i = 0; i < 2; i++)
        if (out_paths[i])
            remove(out_paths[i]);
    exit(1);
}

static char *dup_text(const char *s, size_t n)
{
    char *d = malloc(n + 1);
    if (!d) {
        fprintf(stderr, "mrd_kinds_gen: out of memory\n");
        exit(1);
    }
    memcpy(d, s, n);
    d[n] = '\0';
    return d;
}

/* Splits line into whitespace-separated cells up to a `#`; returns the number of cells. */
static int split(char *line, int lineno, struct row *r)
{
    char *hash = strchr(line, '#');
    int n = 0;
    r->comment = "";
    r->line = lineno;
    if (hash) {
        *hash = '\0';
        char *c = hash + 1;
        while (*c == ' ')
            c++;
        size_t len = strcspn(c, "\r\n");
        if (len > 0)
            r->comment = dup_text(c, len);
    }
    for (char *p = line; *p;) {
        while (*p && isspace((unsigned char)*p))
            p++;
        if (!*p)
            break;
        size_t len = 0;
        while (p[len] && !isspace((unsigned char)p[len]))
            len++;
        if (n == MAX_CELLS)
            fail(table_path, lineno, "more than %d cells", MAX_CELLS);
        r->cell[n++] = dup_text(p, len);
        p += len;
    }
    return n;
}

/* Frees a row that is not kept (a header, a comment-only line): kept rows live until exit. */
static void free_row(struct row *r, int n)
{
    for (int i = 0; i < n; i++)
        free(r->cell[i]);
    if (*r->comment)
        free(r->comment);
}

static int is_ident(const char *s)
{
    if (!isalpha((unsigned char)*s) && *s != '_')
        return 0;
    for (; *s; s++)
        if (!isalnum((unsigned char)*s) && *s != '_')
            return 0;
    return 1;
}

static int is_member(const char *s) /* a struct member path: name, name[0], ... */
{
    for (const char *p = s; *p; p++)
        if (!isalnum((unsigned char)*p) && !strchr("_[]", *p))
            return 0;
    return isalpha((unsigned char)*s) || *s == '_';
}

static long number(const struct row *r, int cell, const char *what, long lo, long hi)
{
    char *end;
    long v = strtol(r->cell[cell], &end, 10);
    if (*end || end == r->cell[cell] || v < lo || v > hi)
        fail(table_path, r->line, "%s '%s' is not a whole number from %ld to %ld", what,
             r->cell[cell], lo, hi);
    return v;
}

static int one_of(const char *s, const char *const *list)
{
    for (int i = 0; list[i]; i++)
        if (!strcmp(s, list[i]))
            return 1;
    return 0;
}

static void check_header(const struct row *r, int n, const char *const *want, int nwant,
                         const char *what)
{
    int same = n == nwant;
    for (int i = 0; same && i < n; i++)
        same = !strcmp(r->cell[i], want[i]);
    if (!same) {
        char names[256] = "";
        for (int i = 0; i < nwant; i++)
            snprintf(names + strlen(names), sizeof names - strlen(names), " %s", want[i]);
        fail(table_path, r->line, "the %s header row must name the columns:%s", what, names);
    }
}

static void check_kind_row(const struct row *r)
{
    static const char *const idents[] = {"fn",    NULL, "struct",  "name",
                                         "batch", NULL, "message", "table"};
    for (int c = K_FN; c <= K_TABLE; c++)
        if (idents[c] && !is_ident(r->cell[c]))
            fail(table_path, r->line, "%s '%s' is not a C identifier", idents[c], r->cell[c]);
    if (number(r, K_VALUE, "value", 1, MAX_KINDS) != nkinds + 1)
        fail(table_path, r->line, "kind values run 1, 2, ... in table order: want %d here",
             nkinds + 1);
    number(r, K_NUMBER, "Batch field number", 1, 536870911);
    number(r, K_SINCE, "since (protocol version)", 1, 255);
    const char *m = r->cell[K_MESSAGE];
    int camel = isupper((unsigned char)*m) != 0;
    for (const char *p = m; *p; p++)
        camel &= isalnum((unsigned char)*p) != 0;
    if (!camel)
        fail(table_path, r->line, "message '%s' is not CamelCase (letters and digits)", m);
    if (strlen(r->cell[K_TAG]) != 1 || !isupper((unsigned char)r->cell[K_TAG][0]))
        fail(table_path, r->line, "tag '%s' is not one capital letter", r->cell[K_TAG]);
    for (int k = 0; k < nkinds; k++)
        for (int c = 0; c < K_CELLS; c++)
            if (c != K_VALUE && c != K_SINCE && !strcmp(kinds[k].row.cell[c], r->cell[c]))
                fail(table_path, r->line, "%s '%s' is already kind %s's (line %d)", kind_header[c],
                     r->cell[c], kinds[k].row.cell[K_FN], kinds[k].row.line);
}

static void check_field_row(const struct kind *k, const struct row *r)
{
    static const char *const classes[] = {"INT", "NN", "GNN", "P2PNULL", NULL};
    static const char *const codecs[] = {"PLAIN", "STR", "DELTA", "DUR", NULL};
    static const char *const types[] = {"uint32", "uint64",  "int32",   "int64", "sint32",
                                        "sint64", "fixed32", "fixed64", NULL};
    const char *codec = r->cell[F_CODEC], *arg = r->cell[F_ARG], *type = r->cell[F_TYPE];

    if (!is_member(r->cell[F_MEMBER]) || !is_ident(r->cell[F_COLUMN]) || !is_ident(r->cell[F_WIRE]))
        fail(table_path, r->line, "member, column and wire must be C names");
    if (!one_of(r->cell[F_CLASS], classes))
        fail(table_path, r->line, "class '%s' is none of INT NN GNN P2PNULL", r->cell[F_CLASS]);
    if (!one_of(codec, codecs))
        fail(table_path, r->line, "codec '%s' is none of PLAIN STR DELTA DUR", codec);
    if (!one_of(type, types))
        fail(table_path, r->line, "type '%s' is not an integer protobuf type", type);
    number(r, F_NUMBER, "field number", 1, 536870911);
    number(r, F_POS, "canonical position", 0, MAX_FIELDS - 1);
    if (strcmp(r->cell[F_SEP], "|") && strcmp(r->cell[F_SEP], ","))
        fail(table_path, r->line, "sep '%s' is neither | nor ,", r->cell[F_SEP]);

    const char *want_type = !strcmp(codec, "DELTA") ? "sint64"
                            : !strcmp(codec, "DUR") ? "uint64"
                            : !strcmp(codec, "STR") ? "uint32"
                                                    : type;
    if (strcmp(type, want_type))
        fail(table_path, r->line, "codec %s travels as %s, not %s", codec, want_type, type);
    int arg_ok = !strcmp(codec, "DELTA") ? !strcmp(arg, "0") || !strcmp(arg, "1")
                 : !strcmp(codec, "DUR") ? 0
                                         : !strcmp(arg, "_");
    for (int i = 0; !strcmp(codec, "DUR") && i < k->nfields; i++)
        arg_ok |= !strcmp(k->field[i].cell[F_MEMBER], arg);
    if (!arg_ok)
        fail(table_path, r->line,
             "arg '%s' does not fit codec %s (DELTA: 0 or 1, the running slot; DUR: a member "
             "listed before; PLAIN, STR: _)",
             arg, codec);
    static const int unique[] = {F_MEMBER, F_COLUMN, F_NUMBER, F_WIRE, F_POS};
    for (int i = 0; i < k->nfields; i++)
        for (size_t u = 0; u < sizeof unique / sizeof unique[0]; u++)
            if (!strcmp(k->field[i].cell[unique[u]], r->cell[unique[u]]))
                fail(table_path, r->line, "%s '%s' is already on line %d", field_header[unique[u]],
                     r->cell[unique[u]], k->field[i].line);
}

static void check_kind_done(const struct kind *k)
{
    if (k->nfields == 0)
        fail(table_path, k->row.line, "kind %s has no field rows", k->row.cell[K_FN]);
    for (int i = 0; i < k->nfields; i++)
        if (atoi(k->field[i].cell[F_POS]) >= k->nfields)
            fail(table_path, k->field[i].line, "canonical position %s: kind %s has %d fields",
                 k->field[i].cell[F_POS], k->row.cell[K_FN], k->nfields);
}

/* Reads the table: full-line comments and blank lines aside, the first unindented row is
 * the kind header, the first indented one the field header; then each kind row is followed
 * by its indented field rows. */
static void read_table(void)
{
    FILE *f = fopen(table_path, "r");
    char line[MAX_LINE];
    int lineno = 0, seen_kind_header = 0, seen_field_header = 0;
    if (!f)
        fail(table_path, 0, "cannot open");
    while (fgets(line, sizeof line, f)) {
        struct row r;
        lineno++;
        if (!strchr(line, '\n') && !feof(f))
            fail(table_path, lineno, "line longer than %d characters", MAX_LINE - 2);
        int indented = line[0] == ' ' || line[0] == '\t';
        int n = split(line, lineno, &r);
        if (n == 0) {
            free_row(&r, n);
        } else if (!indented && !seen_kind_header) {
            check_header(&r, n, kind_header, K_CELLS, "kind");
            seen_kind_header = 1;
            free_row(&r, n);
        } else if (indented && !seen_field_header) {
            check_header(&r, n, field_header, F_CELLS, "field");
            seen_field_header = 1;
            free_row(&r, n);
        } else if (!indented) {
            if (n != K_CELLS)
                fail(table_path, lineno, "a kind row has %d cells, not %d", n, K_CELLS);
            if (nkinds == MAX_KINDS)
                fail(table_path, lineno, "more than %d kinds", MAX_KINDS);
            if (nkinds > 0)
                check_kind_done(&kinds[nkinds - 1]);
            check_kind_row(&r);
            kinds[nkinds++].row = r;
        } else {
            if (nkinds == 0)
                fail(table_path, lineno, "a field row before any kind row");
            struct kind *k = &kinds[nkinds - 1];
            if (n != F_CELLS)
                fail(table_path, lineno, "a field row has %d cells, not %d", n, F_CELLS);
            if (k->nfields == MAX_FIELDS)
                fail(table_path, lineno, "kind %s: more than %d fields", k->row.cell[K_FN],
                     MAX_FIELDS);
            check_field_row(k, &r);
            k->field[k->nfields++] = r;
        }
    }
    fclose(f);
    if (nkinds == 0)
        fail(table_path, lineno, "no kind rows");
    check_kind_done(&kinds[nkinds - 1]);
}

static FILE *open_out(int i)
{
    FILE *f = fopen(out_paths[i], "w");
    if (!f)
        fail(out_paths[i], 0, "cannot write");
    return f;
}

static void write_header(FILE *h)
{
    fprintf(h, "/* Generated by mrd_kinds_gen from proto/kinds.table: edit the table. */\n"
               "#ifndef MRD_KINDS_TABLE_H\n#define MRD_KINDS_TABLE_H\n\n#define MRD_KINDS(X)");
    for (int k = 0; k < nkinds; k++) {
        char **c = kinds[k].row.cell;
        fprintf(h, " \\\n    X(MRD_EV_");
        for (const char *p = c[K_NAME]; *p; p++)
            fputc(toupper((unsigned char)*p), h);
        fprintf(h, ", %s, %s, struct %s, %s, %s, Meridian__V1__%s, meridian__v1__", c[K_VALUE],
                c[K_FN], c[K_STRUCT], c[K_NAME], c[K_BATCH], c[K_MESSAGE]);
        for (const char *p = c[K_MESSAGE]; *p; p++) /* protoc-c's name for the descriptor */
            fprintf(h, "%s%c", p != c[K_MESSAGE] && isupper((unsigned char)*p) ? "_" : "",
                    tolower((unsigned char)*p));
        fprintf(h, "__descriptor, \"%s\", \"%s\")", c[K_TABLE], c[K_TAG]);
    }
    for (int k = 0; k < nkinds; k++) {
        fprintf(h, "\n\n#define MRD__F_%s(F, K)", kinds[k].row.cell[K_FN]);
        for (int i = 0; i < kinds[k].nfields; i++) {
            char **c = kinds[k].field[i].cell;
            fprintf(h, " \\\n    F(K, %s, \"%s\", %s, %s, %s, %s, %s, %s, '%s')", c[F_MEMBER],
                    c[F_COLUMN], c[F_CLASS], c[F_NUMBER], c[F_WIRE], c[F_CODEC], c[F_ARG], c[F_POS],
                    c[F_SEP]);
        }
    }
    fprintf(h, "\n\n#endif\n");
}

/* Ends a generated proto line of `width` characters, with its comment if any. */
static void write_comment(FILE *p, int width, const char *comment)
{
    if (*comment)
        fprintf(p, "%*s// %s", width < COMMENT_COLUMN ? COMMENT_COLUMN - width : 1, "", comment);
    fputc('\n', p);
}

/* Sorts rows[0..n) by the whole number in their cell `cell`: a Columns message's fields by
 * wire number, the kinds by value or by Batch field number. */
static void sort_by_number(const struct row **rows, int n, int cell)
{
    for (int i = 1; i < n; i++) {
        const struct row *r = rows[i];
        int j = i;
        for (; j > 0 && atol(rows[j - 1]->cell[cell]) > atol(r->cell[cell]); j--)
            rows[j] = rows[j - 1];
        rows[j] = r;
    }
}

static void write_columns(FILE *p)
{
    for (int k = 0; k < nkinds; k++) {
        const struct kind *kd = &kinds[k];
        int w = fprintf(p, "message %s {", kd->row.cell[K_MESSAGE]);
        write_comment(p, w, kd->row.comment);
        const struct row *fields[MAX_FIELDS];
        for (int i = 0; i < kd->nfields; i++)
            fields[i] = &kd->field[i];
        sort_by_number(fields, kd->nfields, F_NUMBER);
        for (int i = 0; i < kd->nfields; i++) {
            char *const *c = fields[i]->cell;
            w = fprintf(p, "  repeated %s %s = %s;", c[F_TYPE], c[F_WIRE], c[F_NUMBER]);
            write_comment(p, w, fields[i]->comment);
        }
        fprintf(p, "}\n\n");
    }
}

static void write_kind_lines(FILE *p, const char *indent, int batch)
{
    const struct row *rows[MAX_KINDS];
    for (int k = 0; k < nkinds; k++)
        rows[k] = &kinds[k].row;
    sort_by_number(rows, nkinds, batch ? K_NUMBER : K_VALUE);
    for (int k = 0; k < nkinds; k++) {
        char *const *c = rows[k]->cell;
        int w = fprintf(p, "%s", indent);
        if (batch) {
            w += fprintf(p, "%s %s = %s;", c[K_MESSAGE], c[K_BATCH], c[K_NUMBER]);
        } else {
            w += fprintf(p, "EV_");
            for (const char *s = c[K_NAME]; *s; s++, w++)
                fputc(toupper((unsigned char)*s), p);
            w += fprintf(p, " = %s;", c[K_VALUE]);
        }
        if (atoi(c[K_SINCE]) > 1) {
            char note[64];
            snprintf(note, sizeof note, "added to v%s (additive%s)", c[K_SINCE],
                     batch ? ": older readers skip it" : "");
            write_comment(p, w, note);
        } else {
            fputc('\n', p);
        }
    }
}

static void write_proto(const char *template_path, FILE *p)
{
    static const char *const parts[] = {"columns", "enum", "batch"};
    int seen[3] = {0}, lineno = 0;
    char line[MAX_LINE];
    FILE *t = fopen(template_path, "r");
    if (!t)
        fail(template_path, 0, "cannot open");
    fprintf(p, "// Generated by mrd_kinds_gen from proto/meridian.proto and proto/kinds.table: "
               "edit those.\n");
    while (fgets(line, sizeof line, t)) {
        lineno++;
        const char *s = line + strspn(line, " ");
        if (strncmp(s, "// @kinds ", 10)) {
            fputs(line, p);
            continue;
        }
        int i = 0;
        while (i < 3 && strncmp(s + 10, parts[i], strlen(parts[i])))
            i++;
        if (i == 3)
            fail(template_path, lineno, "unknown marker: want // @kinds columns|enum|batch");
        if (seen[i]++)
            fail(template_path, lineno, "a second // @kinds %s marker", parts[i]);
        char indent[64];
        snprintf(indent, sizeof indent, "%.*s", (int)(s - line), line);
        if (i == 0)
            write_columns(p);
        else
            write_kind_lines(p, indent, i == 2);
    }
    fclose(t);
    for (int i = 0; i < 3; i++)
        if (!seen[i])
            fail(template_path, lineno, "no // @kinds %s marker", parts[i]);
}

int main(int argc, char **argv)
{
    if (argc != 5) {
        fprintf(stderr, "usage: mrd_kinds_gen TABLE TEMPLATE OUT_HEADER OUT_PROTO\n");
        return 2;
    }
    table_path = argv[1];
    read_table();
    out_paths[0] = argv[3];
    out_paths[1] = argv[4];
    FILE *h = open_out(0), *p = open_out(1);
    write_header(h);
    write_proto(argv[2], p);
    if (fclose(h) || fclose(p))
        fail(argv[0], 0, "cannot finish writing the outputs");
    return 0;
}
