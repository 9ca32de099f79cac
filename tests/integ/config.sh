#!/usr/bin/env bash
# config.sh — calibd refuses a bad configuration at start with the file, the
# line and the reason (exit 2): a typo of a key, a section or a method too,
# naming the nearest valid name; lets the command line override the file,
# and reloads on SIGHUP.
. "$(dirname "$0")/lib.sh"

# refuse NAME LINE PATTERN CONTENT (LINE empty: a rule across keys, no line)
refuse() {
    local f="$work/$1.conf"
    printf '%b' "$4" > "$f"
    "$CALIBD" -c "$f" --state-dir "$work/s-$1" > /dev/null 2> "$work/err"
    local rc=$?
    if [ $rc -eq 2 ] && grep -q "calibd: $f:${2:+$2:} .*$3" "$work/err"; then
        ok "$1"
    else
        bad "$1 (rc $rc: $(cat "$work/err"))"
    fi
}

refuse bad_uint 3 "max_pending = 'lots': expected 1..1e8" '[defaults]\nwindow = 60\nmax_pending = lots\n'
refuse zero_ttl 2 "label_ttl = '0': expected seconds > 0" '[model a]\nlabel_ttl = 0\n'
refuse bad_form 2 "form = 'bits'" '[model a]\nform = bits\n'
refuse k_one 3 "k = '1'" '[model a]\nform = logits\nk = 1\n'
refuse bad_bool 2 "auto_models = 'maybe'" '[daemon]\nauto_models = maybe\n'
refuse bad_level 2 "log_level = 'loud'" '[daemon]\nlog_level = loud\n'
refuse bad_tick 2 "tick = '120'" '[daemon]\ntick = 120\n'
refuse bad_name 1 "a model name is" '[model bad/name]\nk = 3\n'
refuse syntax 2 "syntax error" '[daemon]\nthis line has no equals sign\n'
refuse empty_endpoint 2 "empty endpoint" '[daemon]\ningest = tcp://127.0.0.1:1,,\n'
refuse trailing_comma 2 "empty endpoint" '[daemon]\ningest_pull = tcp://127.0.0.1:1,\n'
refuse bad_method 2 "method = 'te mp'" '[model a]\nmethod = te mp\n'
refuse bad_alpha 2 "drift_alpha = '1'" '[defaults]\ndrift_alpha = 1\n'
refuse bad_exec 2 "alert_exec = 'sink.sh': expected an absolute path" '[daemon]\nalert_exec = sink.sh\n'
refuse refit_samples_below_min "" "\\[model a\\]: refit_samples (500) is below refit_min_samples" '[defaults]\nrefit_min_samples = 3000\n[model a]\nrefit_samples = 500\n'
refuse min_improvement_clip "" "\\[defaults\\]: min_improvement (1.5) must be below 2 and below gate_dss_clip" '[defaults]\nmin_improvement = 1.5\ngate_dss_clip = 1\n'
refuse bad_interval 2 "params_interval = '0'" '[daemon]\nparams_interval = 0\n'

"$CALIBD" -c "$work/missing.conf" > /dev/null 2> "$work/err"
check missing_file '[ $? -eq 2 ] && grep -q "missing.conf: No such file" "$work/err"'
"$CALIBD" --bogus > /dev/null 2>&1
check bad_option '[ $? -eq 2 ]'
"$CALIBD" --version | grep -q '^calibd ' && ok version || bad version

# --check-config: what a start would say, without starting
printf '[daemon]\ntick = 0.5\n[model m]\nform = probs\nk = 3\n' > "$work/good.conf"
"$CALIBD" --check-config "$work/good.conf" > "$work/out" 2> "$work/err"
check check_config_ok '[ $? -eq 0 ] && grep -q "good.conf: ok" "$work/out" && [ ! -e "$work/state" ]'
"$CALIBD" --check-config "$work/bad_tick.conf" > /dev/null 2> "$work/err"
check check_config_bad '[ $? -eq 2 ] && grep -q "bad_tick.conf:2: .*tick = .120." "$work/err"'
# what only a start finds: more configured models than max_models
printf '[daemon]\nmax_models = 1\n[model one]\n[model two]\n' > "$work/two.conf"
"$CALIBD" --check-config "$work/two.conf" > /dev/null 2> "$work/err"
check check_config_models '[ $? -eq 2 ] && grep -q "model two: too_many_models" "$work/err"'
# and what librdkafka refuses of [kafka]: a property it does not know
printf '[kafka]\nbrokers = 127.0.0.1:1\ntopics = t\ngroup = g\nstate_dir = %s\nsession.timeout.ms = 6000\nsesion.timeout.ms = 1\n' "$work/k" > "$work/kafka.conf"
"$CALIBD" --check-config "$work/kafka.conf" > /dev/null 2> "$work/err"
check check_config_kafka '[ $? -eq 2 ] && grep -q "\[kafka\] sesion.timeout.ms: No such configuration property" "$work/err" && [ ! -e "$work/k" ]'
# a partitioner that does not hash the key: no model could have its partition
sed 's/^sesion.timeout.ms = 1$/partitioner = random/' "$work/kafka.conf" > "$work/krandom.conf"
"$CALIBD" --check-config "$work/krandom.conf" > /dev/null 2> "$work/err"
check check_config_partitioner '[ $? -eq 2 ] && grep -q "\[kafka\] partitioner = random: calibd needs the partitioner its producers use" "$work/err"'
sed 's/^sesion.timeout.ms = 1$/partitioner = murmur2_random/' "$work/kafka.conf" > "$work/kmurmur.conf"
"$CALIBD" --check-config "$work/kmurmur.conf" > /dev/null 2> "$work/err"
check check_config_partitioner_murmur2 '[ $? -eq 0 ]'
# a check loads no code: librdkafka would dlopen plugin.library.paths as it
# is set (the dynamic loader's own trace says whether it did); the check
# looks for the file only, and says when it is missing
plugin="$CALIB_PLUGIN_DIR/ets"
printf '[kafka]\nbrokers = 127.0.0.1:1\ntopics = t\ngroup = g\nstate_dir = %s\nplugin.library.paths = %s\n' "$work/k" "$plugin" > "$work/kplug.conf"
LD_DEBUG=files "$CALIBD" --check-config "$work/kplug.conf" > "$work/out" 2> "$work/err"
check check_config_no_code '[ $? -eq 0 ] && grep -q "kplug.conf: ok" "$work/out" && grep -q "calling init" "$work/err" && ! grep -q "ets" "$work/err"'
sed 's|plugin.library.paths = .*|plugin.library.paths = '"$work"'/none|' "$work/kplug.conf" > "$work/knone.conf"
"$CALIBD" --check-config "$work/knone.conf" > /dev/null 2> "$work/err"
check check_config_plugin_missing '[ $? -eq 2 ] && grep -q "plugin.library.paths: .*/none: No such file" "$work/err"'

# typos stop the start and fail --check-config, with the line and the
# nearest valid name: a key, a section, [model] without its name, a method
# no plugin provides
refuse typo_key 3 "unknown key 'memory_limt' in \[daemon\]; the nearest is 'memory_limit'" '[daemon]\ncontrol = tcp://127.0.0.1:1\nmemory_limt = 1073741824\n'
refuse typo_section 1 "unknown section \[defualts\]; the nearest is \[defaults\]" '[defualts]\nbins = 10\n'
refuse model_without_name 1 "\[model\] needs the model's name" '[model]\nform = probs\n'
refuse typo_method 3 "\[model m\]: method 'online_temperature' is neither a built-in .* nor a plugin (.*online_temperature.so: No such file or directory)" '[model m]\nform = gaussian\nmethod = online_temperature\n'
refuse near_method 2 "method 'temprature' is neither .*; the nearest is 'temperature'" '[defaults]\nmethod = temprature\n'
refuse fit_params_auto 2 "fit_params: x is not a parameter of method location_scale" '[defaults]\nfit_params = a, x\n'
refuse fit_params_other_method 3 "fit_params: method variance fits all its parameters" '[defaults]\nmethod = variance\nfit_params = w\n'
printf '[defaults]\nmethod = online_temperature\n' > "$work/typo.conf"
"$CALIBD" --check-config "$work/typo.conf" > /dev/null 2> "$work/err"
check check_config_typo_method '[ $? -eq 2 ] && grep -q "typo.conf:2: \[defaults\]: method .online_temperature." "$work/err"'
# the command line over the file
printf '[daemon]\ncontrol = tcp://127.0.0.1:1\n[model m]\nform = probs\nk = 3\nlabel_ttl = 60\n[defaults]\nform = binary\n[model empty]\n' > "$work/ok.conf"
start_calibd -c "$work/ok.conf"
check cli_overrides_file '[ "$CONTROL" != "tcp://127.0.0.1:1" ]'
# a configured model with form and k exists, shaped, before any message
status > "$work/s.json"
check configured_model_shaped '[ "$(json_get "$work/s.json" "r[\"models\"][\"m\"][\"k\"]")" = 3 ]'
# a [model] section without keys still configures its model (from [defaults])
check empty_model_section '[ "$(json_get "$work/s.json" "r[\"models\"][\"empty\"][\"form\"]")" = binary ]'
# wait_log PATTERN: until the log has a line matching it
wait_log() { wait_until "grep -q '$1' '$work/calibd.log'"; }
# SIGHUP with a broken file keeps running; with a good one reloads: the new
# label TTL holds for the join table at the next tick, while the log level
# given on the command line (warn, by lib.sh) stays over the file's
printf '[model m]\nlabel_ttl = -1\n' > "$work/ok.conf"
kill -HUP "$calibd_pid"
check reload_refused 'wait_log "reload refused" && status > /dev/null'
printf '[daemon]\nlog_level = debug\n[model m]\nform = probs\nk = 3\nlabel_ttl = 120\n' > "$work/ok.conf"
kill -HUP "$calibd_pid"
check reload_ok 'wait_for "$work/s.json" "r[\"models\"][\"m\"][\"join\"][\"ttl\"] == 120"'
check reload_keeps_cli_log_level '! grep -q " info: \| debug: " "$work/calibd.log"'
# a file caught empty (being written in place) is refused whole: every
# setting would go back to its default; the TTL stays, the refusal counts
: > "$work/ok.conf"
kill -HUP "$calibd_pid"
check reload_empty_refused 'wait_for "$work/s.json" "r[\"config_reloads_refused\"] == 2" &&
    [ "$(json_get "$work/s.json" "(r[\"config_reloads\"], r[\"models\"][\"m\"][\"join\"][\"ttl\"])")" = "(1, 120)" ] &&
    log_has "holds no setting (caught while it was being written?"'
stop_calibd
check sigterm_exit_0 '[ $? -eq 0 ]'
finish
