#!/bin/sh
# check_man_pages.sh — every installed program and library has its manual
# page, installed and in the tarball. Run by the Makefile:
#
#   check_man_pages.sh installed MANDIR NAME...       (make installcheck)
#   check_man_pages.sh dist DISTDIR SRCDIR NAME...    (make dist)
#
# NAMEs are the Makefile's installed programs and libtool libraries: a
# program P needs P.1 or P.8, a library libX.la needs libX.3. In dist mode
# every page under SRCDIR/man must be in DISTDIR/man too, its .TH line
# naming "calibd $VERSION" when VERSION is set. Prints each
# missing page and exits 1 if there is one.
set -u
mode=$1 dir=$2
shift 2
src=
if [ "$mode" = dist ]; then
    src=$1
    shift
fi
missing=0
miss() {
    echo "check_man_pages: $1" >&2
    missing=1
}
has_page() { # has_page NAME SECTIONS...
    name=$1
    shift
    for sec in "$@"; do
        if [ "$mode" = installed ]; then
            [ -f "$dir/man$sec/$name.$sec" ] && return 0
        else
            [ -f "$dir/man/$name.$sec" ] && return 0
        fi
    done
    return 1
}
for n in "$@"; do
    n=${n##*/}
    case $n in
    *.la) n=${n%.la}; has_page "$n" 3 || miss "$n.3 ($mode) is missing: library $n.la is installed" ;;
    *) n=${n%.exe}; has_page "$n" 1 8 || miss "$n.1 or $n.8 ($mode) is missing: program $n is installed" ;;
    esac
done
if [ "$mode" = dist ]; then
    for page in "$src"/man/*.[1-8]; do
        [ -f "$page" ] || continue
        [ -f "$dir/man/${page##*/}" ] || miss "man/${page##*/} is not in the tarball"
        # its header names the release it documents (VERSION: the package's)
        [ -z "${VERSION:-}" ] || grep -q '^\.so ' "$page" || grep -q "^\.TH .* \"calibd $VERSION\"" "$page" ||
            miss "man/${page##*/}: its .TH line does not name calibd $VERSION"
    done
fi
exit $missing
