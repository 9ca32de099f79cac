#!/usr/bin/env bash
# callgraph.sh — the daemon's layout (HACKING.md, "Layout"): its files call
# one another without a cycle (scripts/callgraph.py on libcalibd's and
# libcalibd_core's objects and main's finds no strongly connected set of
# more than one file), their headers include one another without a cycle,
# and HACKING.md's map names every file. A probe first: the same script
# finds the cycle of two objects made to call each other, so that a
# silent script cannot pass.
set -u
: "${BUILDDIR:?}" "${srcdir:?}"
. "$(dirname "$0")/../integ/tap.sh"
work=$(mktemp -d) || exit 1
trap 'rm -rf "$work"' EXIT
graph="$srcdir/scripts/callgraph.py"
printf 'void b(void);\nvoid a(void) { b(); }\n' > "$work/one.c"
printf 'void a(void);\nvoid b(void) { a(); }\nvoid c(void) { }\n' > "$work/two.c"
printf 'void c(void);\nvoid d(void) { c(); }\n' > "$work/three.c"
for f in one two three; do cc -c -o "$work/$f.o" "$work/$f.c" || exit 1; done
check "the probe: one.o and two.o, which call each other, are a cycle" \
    '[ "$(python3 "$graph" "$work/one.o" "$work/two.o" "$work/three.o")" = "one two" ]'
check "and two.o and three.o are none" 'python3 "$graph" "$work/two.o" "$work/three.o"'
objects=("$BUILDDIR/.libs/libcalibd.a" "$BUILDDIR/.libs/libcalibd_core.a")
main=$(ls "$BUILDDIR"/src/daemon/*main.o 2> /dev/null | head -1)
check "the daemon's objects are built" '[ -s "${objects[0]}" ] && [ -s "${objects[1]}" ] && [ -n "$main" ]'
cycles=$(python3 "$graph" "${objects[@]}" "$main" 2>&1)
check "no cycle between the daemon's files${cycles:+: $cycles}" '[ -z "$cycles" ]'
files=$(python3 "$graph" --dot "${objects[@]}" "$main" | grep -c -- '->')
check "and the graph has its edges ($files)" '[ "$files" -gt 100 ]'
headers=("$srcdir"/src/daemon/*.h "$srcdir"/src/daemon/*/*.h "$srcdir"/src/common/*.h "$srcdir"/include/calib/*.h)
cycles=$(python3 "$graph" --includes "${headers[@]}" 2>&1)
check "no cycle between the headers (${#headers[@]})${cycles:+: $cycles}" '[ -z "$cycles" ]'
unmapped=""
for f in "$srcdir"/src/daemon/*.[ch] "$srcdir"/src/daemon/*/*.[ch] "$srcdir"/src/daemon/*/*.html; do
    b=$(basename "$f")
    grep -qE "^ +(${b%.[ch]}\.c/h|$b) " "$srcdir/HACKING.md" || unmapped="$unmapped $b"
done
check "HACKING.md's map names every file of src/daemon${unmapped:+: not$unmapped}" '[ -z "$unmapped" ]'
finish
