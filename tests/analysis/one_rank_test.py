#!/usr/bin/env python3
"""A one-rank run's report says that cross-rank analysis needs two or more ranks.

The recorded 2 x H200 run (tests/data/h200-quickstart.db.gz) with every row of rank 1
deleted is a one-rank run as a one-GPU machine makes it: the collectives and stragglers
sections must say so in one sentence (not print empty tables or rank 0 as the "top
straggler" with 0 last arrivals), while what one rank can show stays: its steps, its
kernels and its overlap, equal to the two-rank report's figures for rank 0.
"""
import argparse
import gzip
import json
import os
import shutil
import sqlite3
import subprocess
import sys
import tempfile

SENTENCE = "cross-rank analysis (matching, arrival skew, stragglers) needs two or more ranks"


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--meridian", required=True)
    ap.add_argument("--fixture", required=True)
    a = ap.parse_args()
    work = tempfile.mkdtemp(prefix="mrd-one-rank-")
    two = os.path.join(work, "two.db")
    one = os.path.join(work, "one.db")
    with gzip.open(a.fixture, "rb") as src, open(two, "wb") as dst:
        shutil.copyfileobj(src, dst)
    shutil.copy(two, one)
    con = sqlite3.connect(one)
    tables = [r[0] for r in con.execute("SELECT name FROM sqlite_master WHERE type = 'table'")]
    for t in tables:
        cols = [r[1] for r in con.execute("PRAGMA table_info(%s)" % t)]
        if "rank" in cols:
            con.execute("DELETE FROM %s WHERE rank = 1" % t)
    con.execute("UPDATE runs SET world_size = 1")
    con.commit()
    con.close()
    fails = []

    def report(db, *extra):
        p = subprocess.run([a.meridian, "report", db] + list(extra), stdout=subprocess.PIPE,
                           stderr=subprocess.PIPE, text=True, timeout=120)
        if p.returncode != 0:
            fails.append("report %s: exit %d %s" % (db, p.returncode, p.stderr))
        return p.stdout

    text = report(one)
    coll = text[text.find("== Collectives"):text.find("== Communication")]
    strag = text[text.find("== Stragglers"):text.find("== Per step")]
    if SENTENCE not in coll:
        fails.append("collectives section without the one-rank sentence: %r" % coll)
    if SENTENCE not in strag or "last arrivals" in strag:
        fails.append("stragglers section: %r" % strag)
    if "no NVTX step ranges found" in text or "Per step" not in text:
        fails.append("the one rank's steps are missing")
    two_text = report(two)
    if SENTENCE in two_text:
        fails.append("a two-rank report says it needs two ranks")
    j1, j2 = json.loads(report(one, "--json")), json.loads(report(two, "--json"))
    r1 = [r for r in j1["ranks"] if r["rank"] == 0]
    r2 = [r for r in j2["ranks"] if r["rank"] == 0]
    if len(j1["ranks"]) != 1 or not r1 or r1[0]["overlap"] != r2[0]["overlap"]:
        fails.append("rank 0's overlap differs once rank 1 is gone: %r vs %r"
                     % (r1 and r1[0].get("overlap"), r2 and r2[0].get("overlap")))
    for f in fails:
        print("FAIL: " + f, file=sys.stderr)
    if fails:
        print("work directory kept: " + work, file=sys.stderr)
        sys.exit(1)
    shutil.rmtree(work)
    print("one rank: the cross-rank sections say so; rank 0's overlap unchanged")


if __name__ == "__main__":
    main()
