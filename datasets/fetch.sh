#!/usr/bin/env bash
# Fetches a public corpus into a folder and verifies it with sha256, so that runs on different
# machines read the same bytes. Nothing fetched here is ever committed.
#   datasets/fetch.sh reuters21578|20newsgroups|bbc [DEST]      (DEST default: ./data)
# Prints the path to give to `docmine ... --corpus`. Re-running skips verified downloads.
# A download goes to FILE.part and takes its name only once complete and verified; an archive is
# extracted into a scratch folder that takes its place only once complete (and, for Reuters,
# verified): a failed or interrupted fetch leaves no file under a corpus's final name, and
# running it again starts those steps over. The Reuters archive is deleted once its files are in
# place (`--format reuters` reads archives as well: it would read every article twice). Exit 1
# when a download or a check fails, 2 on usage.
set -euo pipefail
here=$(cd "$(dirname "$0")" && pwd)
usage="usage: datasets/fetch.sh reuters21578|20newsgroups|bbc [DEST]"
[ $# -ge 1 ] && [ $# -le 2 ] || { echo "$usage" >&2; exit 2; }
name=$1
case "$name" in
reuters21578|20newsgroups|bbc) ;;
*) echo "fetch: unknown corpus '$name' (reuters21578, 20newsgroups, bbc)" >&2; exit 2 ;;
esac
dest=${2:-data}
mkdir -p "$dest/$name"
cd "$dest/$name"

download() { # url file: FILE.part, then FILE once the transfer is complete
    local status=0
    rm -f "$2.part"
    if command -v curl >/dev/null; then curl -fL --retry 3 -o "$2.part" "$1" || status=$?
    else wget -O "$2.part" "$1" || status=$?; fi
    if [ "$status" -ne 0 ]; then
        rm -f "$2.part"
        echo "fetch: downloading $1 failed (exit ${status}; no network?); nothing was kept" >&2; exit 1
    fi
    mv "$2.part" "$2"
}
matches() { # sha256 file
    echo "$1  $2" | sha256sum -c --quiet - >/dev/null 2>&1
}
fetch_archive() { # url file sha256: downloads FILE unless it is there and verified
    if [ -f "$2" ] && matches "$3" "$2"; then return; fi
    [ ! -f "$2" ] || echo "fetch: $2 does not match its sha256: downloading it again" >&2
    rm -f "$2"
    download "$1" "$2.new"
    if ! matches "$3" "$2.new"; then
        rm -f "$2.new"
        echo "fetch: $1: sha256 mismatch (expected $3); nothing was kept" >&2; exit 1
    fi
    mv "$2.new" "$2"
}
scratch() { # a fresh scratch folder for an extraction, removed on exit unless renamed
    rm -rf .extract; mkdir .extract
    trap 'rm -rf .extract' EXIT
}

case "$name" in
reuters21578)
    # UCI KDD archive, "Reuters-21578 Text Categorization Collection", 8.2 MB. The archive itself is
    # not pinned (mirrors repack it); each extracted SGML file is (datasets/reuters21578.sha256).
    # The archive does not stay in the corpus folder: `--format reuters` reads archives too, and
    # would read every article twice (the .sgm files and the archive's copies).
    if ! sha256sum -c --quiet "$here/reuters21578.sha256" >/dev/null 2>&1; then
        download "https://kdd.ics.uci.edu/databases/reuters21578/reuters21578.tar.gz" reuters21578.tar.gz
        scratch
        tar -xzf reuters21578.tar.gz -C .extract || {
            rm -f reuters21578.tar.gz
            echo "fetch: reuters21578.tar.gz: cannot be extracted; nothing was kept" >&2; exit 1; }
        (cd .extract && sha256sum -c --quiet "$here/reuters21578.sha256") || {
            rm -f reuters21578.tar.gz
            echo "fetch: reuters21578: extracted files do not match (datasets/reuters21578.sha256); nothing was kept" >&2; exit 1; }
        for f in .extract/* .extract/.[!.]*; do [ ! -e "$f" ] || { rm -rf "${f#.extract/}"; mv "$f" .; }; done
    fi
    rm -f reuters21578.tar.gz # also the one an older fetch.sh left beside the verified files
    echo "$PWD   (docmine ... --corpus $PWD --format reuters)"
    ;;
20newsgroups)
    # 20 Newsgroups "bydate" (Rennie), 14 MB, the archive scikit-learn's fetch_20newsgroups uses.
    sum=8f1b2514ca22a5ade8fbb9cfa5727df95fa587f4c87b786e15c759fa66d95610
    if [ ! -d 20news-bydate-train ] || [ ! -d 20news-bydate-test ]; then
        fetch_archive "http://qwone.com/~jason/20Newsgroups/20news-bydate.tar.gz" 20news-bydate.tar.gz $sum
        scratch
        tar -xzf 20news-bydate.tar.gz -C .extract || { echo "fetch: 20news-bydate.tar.gz: cannot be extracted" >&2; exit 1; }
        rm -rf 20news-bydate-train 20news-bydate-test
        # the test half first: the train half is the one the check above and docmine look for
        mv .extract/20news-bydate-test . && mv .extract/20news-bydate-train .
    fi
    echo "$PWD/20news-bydate-train   (docmine ... --corpus $PWD/20news-bydate-train --labels dir; the test half: $PWD/20news-bydate-test)"
    ;;
bbc)
    # BBC News (Greene and Cunningham, ICML 2006), 2,225 articles in 5 topics, 2.9 MB.
    sum=a351031a62325b3d7ff13146eeb035c22feca8290913b5183d1ff3be35109495
    if [ ! -d bbc ]; then
        fetch_archive "http://mlg.ucd.ie/files/datasets/bbc-fulltext.zip" bbc-fulltext.zip $sum
        scratch
        python3 -c 'import sys, zipfile; zipfile.ZipFile(sys.argv[1]).extractall(sys.argv[2])' bbc-fulltext.zip .extract ||
            { echo "fetch: bbc-fulltext.zip: cannot be extracted" >&2; exit 1; }
        mv .extract/bbc .
    fi
    echo "$PWD/bbc   (docmine ... --corpus $PWD/bbc --labels dir)"
    ;;
esac
