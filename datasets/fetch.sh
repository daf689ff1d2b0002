#!/usr/bin/env bash
# Fetches a public corpus into a folder and verifies it with sha256, so that runs on different
# machines read the same bytes. Nothing fetched here is ever committed.
#   datasets/fetch.sh reuters21578|20newsgroups|bbc [DEST]      (DEST default: ./data)
# Prints the path to give to `docmine ... --corpus`. Re-running skips verified downloads.
set -euo pipefail
here=$(cd "$(dirname "$0")" && pwd)
name=${1:?usage: datasets/fetch.sh reuters21578|20newsgroups|bbc [DEST]}
dest=${2:-data}
mkdir -p "$dest/$name"
cd "$dest/$name"

download() { # url file
    if command -v curl >/dev/null; then curl -fL --retry 3 -o "$2.part" "$1"
    else wget -O "$2.part" "$1"; fi
    mv "$2.part" "$2"
}
verify() { # sha256 file
    echo "$1  $2" | sha256sum -c --quiet - || { echo "fetch: $2: sha256 mismatch (expected $1); remove it and retry" >&2; exit 1; }
}

case "$name" in
reuters21578)
    # UCI KDD archive, "Reuters-21578 Text Categorization Collection", 8.2 MB. The archive itself is
    # not pinned (mirrors repack it); each extracted SGML file is (datasets/reuters21578.sha256).
    if ! sha256sum -c --quiet "$here/reuters21578.sha256" 2>/dev/null; then
        download "https://kdd.ics.uci.edu/databases/reuters21578/reuters21578.tar.gz" reuters21578.tar.gz
        tar -xzf reuters21578.tar.gz
        sha256sum -c --quiet "$here/reuters21578.sha256" || { echo "fetch: reuters21578: extracted files do not match" >&2; exit 1; }
    fi
    echo "$PWD   (docmine ... --corpus $PWD --format reuters)"
    ;;
20newsgroups)
    # 20 Newsgroups "bydate" (Rennie), 14 MB, the archive scikit-learn's fetch_20newsgroups uses.
    sum=8f1b2514ca22a5ade8fbb9cfa5727df95fa587f4c87b786e15c759fa66d95610
    [ -f 20news-bydate.tar.gz ] || download "http://qwone.com/~jason/20Newsgroups/20news-bydate.tar.gz" 20news-bydate.tar.gz
    verify $sum 20news-bydate.tar.gz
    [ -d 20news-bydate-train ] || tar -xzf 20news-bydate.tar.gz
    echo "$PWD   (docmine ... --corpus $PWD/20news-bydate-train --labels dir)"
    ;;
bbc)
    # BBC News (Greene and Cunningham, ICML 2006), 2,225 articles in 5 topics, 2.9 MB.
    sum=a351031a62325b3d7ff13146eeb035c22feca8290913b5183d1ff3be35109495
    [ -f bbc-fulltext.zip ] || download "http://mlg.ucd.ie/files/datasets/bbc-fulltext.zip" bbc-fulltext.zip
    verify $sum bbc-fulltext.zip
    [ -d bbc ] || python3 -c 'import zipfile; zipfile.ZipFile("bbc-fulltext.zip").extractall(".")'
    echo "$PWD/bbc   (docmine ... --corpus $PWD/bbc --labels dir)"
    ;;
*)
    echo "fetch: unknown corpus '$name' (reuters21578, 20newsgroups, bbc)" >&2; exit 2 ;;
esac
