# Sourced by the package tests (deb_install_test.sh, tarball_test.sh): check WHAT COMMAND... runs
# COMMAND and prints one line, ok or FAIL with the tail of its output, and counts the failures;
# $work is the test's temp dir.
failures=0
check() {
  local what=$1
  shift
  if "$@" > "$work/check.out" 2>&1; then
    echo "ok   $what"
  else
    echo "FAIL $what"
    sed 's/^/     /' "$work/check.out" | tail -20
    failures=$((failures + 1))
  fi
}
