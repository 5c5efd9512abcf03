/* fuzz_replay: runs fuzz_frame_batch's LLVMFuzzerTestOneInput over files without
 * libFuzzer, so CTest replays the committed corpus (and any crash input) on every build,
 * with whatever sanitizers the build has.
 * Usage: fuzz_replay PATH... (a directory means every regular file in it). Exits 1 when
 * nothing was replayed, so a missing corpus fails the test instead of passing it. */
#include <dirent.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

#define REPLAY_MAX_INPUT (64u << 20)

static int replay_file(const char *path)
{
    FILE *fp = fopen(path, "rb");
    uint8_t *buf;
    long n;

    if (!fp)
        return 0;
    if (fseek(fp, 0, SEEK_END) != 0 || (n = ftell(fp)) < 0 || (unsigned long)n > REPLAY_MAX_INPUT ||
        fseek(fp, 0, SEEK_SET) != 0) {
        fclose(fp);
        fprintf(stderr, "fuzz_replay: cannot read %s\n", path);
        exit(1);
    }
    buf = malloc((size_t)n + 1);
    if (!buf || fread(buf, 1, (size_t)n, fp) != (size_t)n) {
        fprintf(stderr, "fuzz_replay: cannot read %s\n", path);
        exit(1);
    }
    fclose(fp);
    LLVMFuzzerTestOneInput(buf, (size_t)n);
    free(buf);
    return 1;
}

static int cmp(const void *a, const void *b)
{
    return strcmp(*(char *const *)a, *(char *const *)b);
}

static int replay_dir(const char *dir)
{
    DIR *d = opendir(dir);
    struct dirent *de;
    char **names = NULL;
    size_t n = 0, cap = 0;
    int done = 0;

    if (!d)
        return 0;
    while ((de = readdir(d)) != NULL) {
        if (de->d_name[0] == '.')
            continue;
        if (n == cap) {
            cap = cap ? cap * 2 : 256;
            names = realloc(names, cap * sizeof(*names));
            if (!names)
                exit(1);
        }
        if (asprintf(&names[n], "%s/%s", dir, de->d_name) < 0)
            exit(1);
        n++;
    }
    closedir(d);
    qsort(names, n, sizeof(*names), cmp); /* same order every run */
    for (size_t i = 0; i < n; i++) {
        struct stat st;

        if (stat(names[i], &st) == 0 && S_ISREG(st.st_mode))
            done += replay_file(names[i]);
        free(names[i]);
    }
    free(names);
    return done;
}

int main(int argc, char **argv)
{
    int done = 0;

    for (int i = 1; i < argc; i++) {
        struct stat st;

        if (stat(argv[i], &st) != 0) {
            fprintf(stderr, "fuzz_replay: %s: no such file or directory\n", argv[i]);
            return 1;
        }
        done += S_ISDIR(st.st_mode) ? replay_dir(argv[i]) : replay_file(argv[i]);
    }
    printf("fuzz_replay: %d inputs replayed\n", done);
    return done > 0 ? 0 : 1;
}
