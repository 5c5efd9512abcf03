#!/usr/bin/env python3
"""analysis_db_inputs: what `meridian report`, `export`, `finalize` (and `diff`, when this
build has it) do with a database they should not read, and what every reader and
`meridian profile` leave next to a database.

  1. a database of a newer schema version (the version row set to 99) is refused by each
     command, exit 1, with "has schema version 99, newer than this meridian supports":
     the file stays byte for byte as it was (sha256) and gains no -wal/-shm/-journal, in
     rollback-journal mode and in WAL mode (as meridiand writes it);
  2. bad inputs, each command, exit 1 and its message: a directory, an empty file, a file
     that is not SQLite, a foreign SQLite file, an SQLite file without tables, a missing
     file, a file the user cannot read (as root: run as nobody through setpriv);
  3. a read-only report/export of a WAL database leaves no -wal/-shm (and keeps its
     bytes); finalize (read-write) leaves none either; a report while another connection
     holds the database open still works;
  4. `meridian profile` leaves no -wal/-shm, with a trivial job and, when mpirun exists,
     with analysis_profile_e2e's no-GPU job (4 ranks of `meridian replay`);
  5. `meridian profile` of a command that does not exist: exit 127, says the command
     could not be started, leaves nothing at -o (no -wal/-shm, no secret).

usage: db_inputs.py MERIDIAN ANALYSIS_MKDB WORKDIR
"""
import hashlib
import os
import shutil
import sqlite3
import subprocess
import sys
import testlib

fails = []


fail, check = testlib.reporter("analysis_db_inputs", fails)


def run(args, timeout=60, prefix=()):
    return subprocess.run(list(prefix) + list(args), stdout=subprocess.PIPE,
                          stderr=subprocess.PIPE, text=True, timeout=timeout)


def sha(path):
    with open(path, "rb") as f:
        return hashlib.sha256(f.read()).hexdigest()


def side_files(path):
    return [path + s for s in ("-wal", "-shm", "-journal") if os.path.exists(path + s)]


def is_wal(path):
    with open(path, "rb") as f:
        hdr = f.read(20)
    return hdr[18] == 2 and hdr[19] == 2


def has_diff(meridian):
    return run([meridian, "diff", "--help"]).returncode == 0


def commands(meridian, db, good, out):
    """(name, argv) of every reader/finalizer of db; diff both ways when it exists."""
    cmds = [("report", [meridian, "report", db]),
            ("report --json", [meridian, "report", db, "--json"]),
            ("export", [meridian, "export", db, "--perfetto", out]),
            ("finalize", [meridian, "finalize", db])]
    if has_diff(meridian):
        cmds += [("diff A", [meridian, "diff", db, good]), ("diff B", [meridian, "diff", good, db])]
    return cmds


def set_version(path, version):
    con = sqlite3.connect(path)
    con.execute("UPDATE schema_version SET version = ?", (version,))
    con.commit()
    con.close()


def to_wal(path):
    con = sqlite3.connect(path)
    con.execute("PRAGMA journal_mode=WAL")
    con.close()


def check_newer(meridian, good, work):
    for mode in ("rollback", "wal"):
        db = os.path.join(work, "newer-%s.db" % mode)
        shutil.copy(good, db)
        if mode == "wal":
            to_wal(db)
            check(is_wal(db), "newer-wal.db is not in WAL mode")
        set_version(db, 99)
        check(not side_files(db), "%s: side files before the test" % db)
        before = sha(db)
        for name, argv in commands(meridian, db, good, os.path.join(work, "newer.json")):
            p = run(argv)
            what = "newer schema (%s), %s" % (mode, name)
            check(p.returncode == 1, "%s: exit %d, expected 1: %s" % (what, p.returncode, p.stderr))
            check("has schema version 99, newer than this meridian supports (2): use a newer "
                  "meridian" in p.stderr, "%s: message: %r" % (what, p.stderr))
            check(sha(db) == before, "%s: the file changed" % what)
            check(not side_files(db), "%s: left %s" % (what, side_files(db)))


def bad_inputs(work):
    """(name, path, expected message) of each bad input, created under work."""
    d = os.path.join(work, "adir.db")
    os.makedirs(d, exist_ok=True)
    empty = os.path.join(work, "empty.db")
    open(empty, "w").close()
    junk = os.path.join(work, "junk.db")
    with open(junk, "w") as f:
        f.write("not a database at all\n" * 100)
    foreign = os.path.join(work, "foreign.db")
    con = sqlite3.connect(foreign)
    con.execute("CREATE TABLE IF NOT EXISTS t (x)")
    con.commit()
    con.close()
    notables = os.path.join(work, "notables.db")
    con = sqlite3.connect(notables)
    con.execute("PRAGMA user_version = 3")  # a valid SQLite file, no table
    con.close()
    missing = os.path.join(work, "missing.db")
    return [
        ("directory", d, "%s is a directory, not a meridian database" % d),
        ("empty file", empty, "%s is empty: not a meridian database (was the run stopped "
                              "before meridiand created it?)" % empty),
        ("not SQLite", junk, "%s is not a meridian database: " % junk),
        ("foreign SQLite", foreign, "%s is not a meridian database: " % foreign),
        ("SQLite without tables", notables, "%s is not a meridian database: " % notables),
        ("missing", missing, "cannot read %s: no such file or directory" % missing),
    ]


def check_bad_inputs(meridian, good, work):
    for what, path, msg in bad_inputs(work):
        before = sha(path) if os.path.isfile(path) else None
        for name, argv in commands(meridian, path, good, os.path.join(work, "bad.json")):
            p = run(argv)
            check(p.returncode == 1, "%s, %s: exit %d, expected 1: %s"
                  % (what, name, p.returncode, p.stderr))
            check(msg in p.stderr, "%s, %s: message %r, expected %r" % (what, name, p.stderr, msg))
            check("disk I/O error" not in p.stderr, "%s, %s: %r" % (what, name, p.stderr))
        if before is not None:
            check(sha(path) == before, "%s: the file changed" % what)
        check(not side_files(path), "%s: left %s" % (what, side_files(path)))
    check_unreadable(meridian, good, work)


def check_unreadable(meridian, good, work):
    """A file the user may not read. Root reads every file: run as nobody (setpriv)."""
    path = os.path.join(work, "unreadable.db")
    shutil.copy(good, path)
    os.chmod(path, 0)
    prefix = ()
    if os.geteuid() == 0:
        setpriv = shutil.which("setpriv")
        if not setpriv:
            print("analysis_db_inputs: note: root without setpriv: unreadable file not checked")
            return
        prefix = (setpriv, "--reuid=65534", "--regid=65534", "--clear-groups", "--")
        os.chmod(work, 0o755)
    for name, argv in commands(meridian, path, good, os.path.join(work, "unreadable.json")):
        if name.startswith("export"):
            argv[-1] = "-"  # nobody cannot write into the work directory
        p = run(argv, prefix=prefix)
        check(p.returncode == 1, "unreadable, %s: exit %d: %s" % (name, p.returncode, p.stderr))
        check("cannot read %s: permission denied" % path in p.stderr,
              "unreadable, %s: message %r" % (name, p.stderr))


def check_wal_readers(meridian, good, work):
    db = os.path.join(work, "wal.db")
    shutil.copy(good, db)
    to_wal(db)
    check(is_wal(db) and not side_files(db), "wal.db: WAL mode, no side files")
    before = sha(db)
    for name, argv in (("report", [meridian, "report", db]),
                       ("report --json", [meridian, "report", db, "--json"]),
                       ("export", [meridian, "export", db, "--perfetto",
                                   os.path.join(work, "wal.json")])):
        p = run(argv)
        check(p.returncode == 0, "WAL %s: exit %d: %s" % (name, p.returncode, p.stderr))
        check(not side_files(db), "WAL %s (read-only) left %s" % (name, side_files(db)))
        check(sha(db) == before, "WAL %s (read-only) changed the file" % name)
    p = run([meridian, "finalize", db])
    check(p.returncode == 0, "WAL finalize: exit %d: %s" % (p.returncode, p.stderr))
    check(not side_files(db), "WAL finalize left %s" % side_files(db))
    # another connection has it open (as a running meridiand would): the report reads it
    # through the WAL and adds nothing once that connection closes
    con = sqlite3.connect(db)
    con.execute("SELECT count(*) FROM runs").fetchall()
    p = run([meridian, "report", db])
    check(p.returncode == 0, "WAL report, database open elsewhere: exit %d: %s"
          % (p.returncode, p.stderr))
    con.close()
    check(not side_files(db), "WAL report while open elsewhere: left %s" % side_files(db))


def check_profile(meridian, work):
    db = os.path.join(work, "true.db")
    p = run([meridian, "profile", "-o", db, "--", "true"], timeout=120)
    check(p.returncode == 0, "profile -- true: exit %d: %s" % (p.returncode, p.stderr[-2000:]))
    check(os.path.exists(db), "profile -- true: no database")
    check(not side_files(db), "profile -- true left %s" % side_files(db))
    p = run([meridian, "report", db])
    check(p.returncode == 0 and not side_files(db),
          "report after profile: exit %d, left %s" % (p.returncode, side_files(db)))
    if not shutil.which("mpirun"):
        print("analysis_db_inputs: note: no mpirun: the e2e job's profile not checked")
        return
    db = os.path.join(work, "replay.db")
    mpi = ["mpirun", "-np", "4", "--allow-run-as-root", "--oversubscribe", "--mca", "btl",
           "self,tcp"]
    p = run([meridian, "profile", "-o", db, "--no-mpi-wrappers", "--json",
             os.path.join(work, "replay.json"), "--"] + mpi
            + [meridian, "replay", "--events", "3000", "--quiet"], timeout=180)
    check(p.returncode == 0, "profile (e2e job): exit %d: %s" % (p.returncode, p.stderr[-2000:]))
    check(os.path.exists(db), "profile (e2e job): no database")
    check(not side_files(db), "profile (e2e job) left %s" % side_files(db))
    for argv in ([meridian, "report", db], [meridian, "export", db, "--perfetto",
                                            os.path.join(work, "replay-trace.json")]):
        p = run(argv)
        check(p.returncode == 0, "%s after profile: exit %d" % (argv[1], p.returncode))
        check(not side_files(db), "%s after profile left %s" % (argv[1], side_files(db)))


def check_missing_command(meridian, work):
    for cmd in ("/nonexistent/cmd", "meridian-no-such-command-here"):
        db = os.path.join(work, "notstarted.db")
        p = run([meridian, "profile", "-o", db, "--", cmd], timeout=120)
        check(p.returncode == 127, "profile -- %s: exit %d, expected 127: %s"
              % (cmd, p.returncode, p.stderr))
        check("cannot run %s" % cmd in p.stderr and "could not be started" in p.stderr,
              "profile -- %s: message %r" % (cmd, p.stderr))
        check(not os.path.exists(db) and not side_files(db),
              "profile -- %s left %s" % (cmd, [f for f in os.listdir(work)
                                                if f.startswith("notstarted")]))
        check("did not stop cleanly" not in p.stderr and "did not exit" not in p.stderr,
              "profile -- %s: meridiand did not stop cleanly: %r" % (cmd, p.stderr))
    left = [f for f in os.listdir(work) if f.endswith(".secret")]
    check(not left, "secret files left: %s" % left)


def main():
    meridian, mkdb, work = sys.argv[1:4]
    if os.path.isdir(work):
        for root, dirs, _ in os.walk(work):  # a failed run may have left mode 000 files
            for d in dirs:
                os.chmod(os.path.join(root, d), 0o755)
    shutil.rmtree(work, ignore_errors=True)
    os.makedirs(work)
    good = os.path.join(work, "fixture.db")
    p = run([mkdb, good])
    if p.returncode != 0:
        fail("analysis_mkdb: %s" % p.stderr)
        sys.exit(1)
    if not has_diff(meridian):
        print("analysis_db_inputs: note: this meridian has no diff command: not checked")
    check_newer(meridian, good, work)
    check_bad_inputs(meridian, good, work)
    check_wal_readers(meridian, good, work)
    check_profile(meridian, work)
    check_missing_command(meridian, work)
    if fails:
        print("analysis_db_inputs: %d check(s) failed" % len(fails))
        sys.exit(1)
    print("analysis_db_inputs: ok")


if __name__ == "__main__":
    main()
