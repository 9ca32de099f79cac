#!/usr/bin/env bash
# kafka_cooperative.sh — kafka.sh's scenario with the group's
# partition.assignment.strategy = cooperative-sticky: a rebalance revokes
# and assigns only the partitions that change owner (incremental assign
# and unassign), the others read on untouched.
KAFKA_STRATEGY=cooperative-sticky
. "$(dirname "$0")/kafka.sh"
