#!/usr/bin/env bash
# The similarity report of one lab's submitted C files: JPlag (Maven Central) compares every pair
# of students, with the lab's skeletons as base code, and the report goes next to the grades:
#   COURSE/similarity-LAB/similarity.csv    every pair, most similar first
#   COURSE/similarity-LAB/jplag-report.zip  JPlag's own report (open it in JPlag's report viewer)
# Pairs at or above the flag threshold are printed. A flag is a reason to read two files side
# by side, not a verdict: ring and Bruck are short and public, so honest solutions look alike.
#   scripts/similarity.sh lab2            (or: make similarity ASSIGNMENT=lab2)
# Env: COURSE (default grader/), MPILAB_SIMILARITY_FLAG (default 0.5: JPlag's average similarity,
# 0..1), JAVA_HOME (a Java 21 or newer; else the first one found in PATH or /usr/lib/jvm).
set -euo pipefail
here=$(cd "$(dirname "$0")/.." && pwd)
assignment=${1:?usage: scripts/similarity.sh ASSIGNMENT (e.g. lab2)}
course=$(cd "${COURSE:-$here/grader}" && pwd -P)
flag=${MPILAB_SIMILARITY_FLAG:-0.5}
die() { printf 'similarity: %s\n' "$*" >&2; exit "${2:-1}"; }

[[ "$flag" =~ ^(0(\.[0-9]+)?|1(\.0+)?)$ ]] || die "MPILAB_SIMILARITY_FLAG='$flag' is not a similarity between 0 and 1 (e.g. 0.5)" 2
skeletons=("$here/labs/$assignment"/*.c)
if [ ! -d "$here/labs/$assignment" ]; then
    valid=$(cd "$here/labs" && for d in lab*/; do printf '%s ' "${d%/}"; done)
    die "unknown assignment '$assignment'; valid: $valid" 2
fi
[ -e "${skeletons[0]}" ] || die "$assignment has no C files to compare (labs/$assignment/*.c)" 2

# A Java 21 or newer (JPlag 6 needs it; Debian bookworm's default is 17).
java_major() { "$1" -version 2>&1 | sed -n 's/.*version "\([0-9]*\).*/\1/p' | head -n 1; }
java=""
for candidate in ${JAVA_HOME:+"$JAVA_HOME/bin/java"} "$(command -v java || true)" /usr/lib/jvm/*/bin/java; do
    [ -n "$candidate" ] && [ -x "$candidate" ] || continue
    major=$(java_major "$candidate")
    if [ -n "$major" ] && [ "$major" -ge 21 ] && [ -x "$(dirname "$candidate")/javac" ]; then
        java=$candidate
        break
    fi
done
[ -n "$java" ] || die "JPlag needs a Java development kit 21 or newer (java and javac); none in JAVA_HOME, PATH or /usr/lib/jvm. Install one (e.g. Temurin 21) and set JAVA_HOME"
command -v mvn >/dev/null || die "mvn is not installed (Debian: maven); it fetches JPlag from Maven Central"

# JPlag's jars and the kit's driver, built once per version of the two inputs.
build=$here/build/similarity
want=$(cat "$here/similarity/pom.xml" "$here/similarity/Similarity.java" | sha256sum | cut -c1-16)
if [ "$(cat "$build/.stamp" 2>/dev/null)" != "$want" ]; then
    rm -rf "$build" && mkdir -p "$build/classes"
    echo "similarity: fetching JPlag from Maven Central into build/similarity/lib"
    JAVA_HOME=$(dirname "$(dirname "$java")") mvn -q -B -f "$here/similarity/pom.xml" \
        dependency:copy-dependencies -DoutputDirectory="$build/lib" \
        || die "mvn could not fetch JPlag (see above)"
    "$(dirname "$java")/javac" -d "$build/classes" -cp "$build/lib/*" "$here/similarity/Similarity.java"
    echo "$want" > "$build/.stamp"
fi

# One folder per student with their regular .c files (a submitted link is never followed), and
# the skeletons as base code.
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
mkdir -p "$work/submissions" "$work/base"
cp "${skeletons[@]}" "$work/base/"
n=0
for dir in "$course"/submitted/*/"$assignment"; do
    [ -d "$dir" ] || continue
    student=$(basename "$(dirname "$dir")")
    files=()
    while IFS= read -r -d '' f; do files+=("$f"); done < <(find "$dir" -maxdepth 1 -type f -name '*.c' -print0)
    [ "${#files[@]}" -gt 0 ] || continue
    mkdir -p "$work/submissions/$student"
    cp "${files[@]}" "$work/submissions/$student/"
    n=$((n + 1))
done
[ "$n" -ge 2 ] || die "$n submission(s) of $assignment with C files in $course/submitted: nothing to compare" 2
out=$course/similarity-$assignment
rm -rf "$out"
"$java" -cp "$build/lib/*:$build/classes" Similarity "$work/submissions" "$work/base" "$out" \
    | grep -v '^\[' || true
[ -s "$out/similarity.csv" ] || die "JPlag wrote no report (see above)"
echo "similarity: pairs at or above $flag (MPILAB_SIMILARITY_FLAG); read them side by side:"
awk -F, -v flag="$flag" 'NR > 1 && $3 + 0 >= flag + 0 { printf "  %-20s %-20s %.2f\n", $1, $2, $3; found = 1 }
    END { if (!found) print "  none" }' "$out/similarity.csv"
echo "similarity: every pair in $out/similarity.csv; JPlag's report: $out/jplag-report.zip"
