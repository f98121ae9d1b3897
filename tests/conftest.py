from __future__ import annotations

import json
import sqlite3
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
SHARED_DATA = ROOT.parent / "shared" / "data"


@pytest.fixture
def shared_data() -> Path:
    if not (SHARED_DATA / "qmsum").is_dir() or not (SHARED_DATA / "iq2-corpus").is_dir():
        pytest.skip(
            f"real human data not present at {SHARED_DATA} (only in the project's development checkout; see its README)"
        )
    return SHARED_DATA


def write_json(path: Path, obj) -> Path:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(json.dumps(obj), encoding="utf-8")
    return path


def qmsum_meeting(n: int, speakers=("Project Manager", "Marketing", "User Interface")) -> dict:
    return {
        "topic_list": [{"topic": "Budget", "relevant_text_span": [["0", str(n - 1)]]}],
        "meeting_transcripts": [
            {"speaker": speakers[i % len(speakers)], "content": f"Turn number {i} about the budget {{vocalsound}} ."}
            for i in range(n)
        ],
    }


TEST_KEY = "sk-cocoeval-test-" + "Q7" * 16
"""A fake API key: tests check it never reaches caches, logs or outputs."""


SLOW: tuple[str, ...] = (
    "tests/analysis/test_charts_report.py::test_other_charts",
    "tests/analysis/test_charts_report.py::test_report_writes_the_papers_figures_and_tables",
    "tests/analysis/test_charts_report.py::test_a_report_in_a_process_that_read_the_run_does_not_read_it_again",
    "tests/analysis/test_charts_report.py::test_chart_builders_hand_altair_no_shorthand_to_wrap",
    "tests/analysis/test_charts_report.py::test_no_tooltip_of_the_report_shows_a_field_twice",
    "tests/analysis/test_convstats.py::test_report_leads_with_the_judge_free_comparison_and_marks_a_pipeline_check",
    "tests/analysis/test_convstats.py::test_demo_report_has_the_judge_free_comparison_with_intervals",
    "tests/analysis/test_convstats_reference.py::test_real_data_gives_the_same_values",
    "tests/analysis/test_coverage.py::test_the_report_and_the_notebooks_list_what_the_run_lacks",
    "tests/analysis/test_frames_missing.py::test_the_report_shows_what_is_missing",
    "tests/analysis/test_html_report.py::test_the_file_is_self_contained_and_escapes_every_text",
    "tests/analysis/test_html_report.py::test_in_the_browser_from_file",
    "tests/analysis/test_html_viewer.py",
    "tests/analysis/test_inference.py::test_report_on_a_run_without_setups_and_its_parameter_errors",
    "tests/analysis/test_kept_frames.py::test_the_judge_free_frames_are_kept_and_a_report_then_reads_no_record",
    "tests/analysis/test_kept_report.py::test_a_kept_report_is_copied_and_is_the_report_written_anew",
    "tests/analysis/test_kept_report.py::test_a_changed_file_setting_or_code_writes_the_report_anew",
    "tests/analysis/test_kept_report.py::test_a_kept_report_that_is_not_what_was_kept_is_written_anew_and_said",
    "tests/analysis/test_kept_report.py::test_a_failed_report_keeps_nothing_and_a_run_folder_that_keeps_nothing_still_reports",
    "tests/analysis/test_leaderboard.py::test_the_report_has_a_leaderboard_section",
    "tests/analysis/test_render_fonts.py::test_figures_are_drawn_with_the_bundled_liberation_sans_whatever_the_host_has",
    "tests/analysis/test_render_fonts.py::test_characters_the_bundled_font_lacks_come_from_the_hosts_fonts",
    "tests/analysis/test_report_same.py",
    "tests/cli/test_cli.py::test_md_escape_adds_no_markup_and_keeps_the_text",
    "tests/cli/test_cli_fuzz.py::test_malformed_files_give_a_clear_error",
    "tests/cli/test_compare_cli.py",
    "tests/cli/test_documented_walkthroughs.py",
    "tests/cli/test_file_modes.py",
    "tests/cli/test_hostile_plugins.py::test_a_plugin_that_edits_what_it_is_given_changes_neither_the_reference_nor_the_judged_text",
    "tests/cli/test_hostile_plugins.py::test_a_plugin_that_blocks_is_stopped_at_its_step_time_limit",
    "tests/cli/test_hostile_plugins.py::test_a_rerun_keeps_what_a_nondeterministic_plugin_finished_and_pays_nothing_again",
    "tests/cli/test_hostile_plugins.py::test_an_agent_that_answers_as_someone_else_and_a_moderator_that_writes_the_turn_are_told_apart",
    "tests/cli/test_interrupt.py",
    "tests/cli/test_paired_cli.py",
    "tests/cli/test_lazy_imports.py::test_the_iri_grammar_is_built_at_its_first_use_with_the_same_answers",
    "tests/cli/test_lazy_imports.py::test_the_analysis_modules_import_scipy_only_when_a_statistic_needs_it",
    "tests/cli/test_run_keeps_frames.py::test_the_first_report_after_a_run_reads_its_kept_frames_and_no_record",
    "tests/cli/test_simulators_cli.py::test_export_import_and_judge_like_a_simulated_setup",
    "tests/cli/test_turn_taking_cli.py",
    "tests/cli/test_untrusted_inputs.py::test_import_continuations_writes_the_path_relative_to_the_params_files_folder",
    "tests/cli/test_untrusted_inputs.py::test_the_records_model_label_is_named_in_the_report_and_the_params_file",
    "tests/cli/test_untrusted_inputs.py::test_a_judgment_edited_to_an_unknown_behaviour_is_counted_invalid_with_the_reason",
    "tests/cli/test_untrusted_inputs.py::test_an_instance_with_an_empty_reference_is_refused_at_build_import_and_parquet_read",
    "tests/cli/test_untrusted_inputs.py::test_a_parquet_benchmark_edited_after_export_is_refused_until_its_card_agrees",
    "tests/cli/test_untrusted_inputs.py::test_an_import_counts_continuations_and_names_the_real_cause_of_each_problem",
    "tests/cli/test_untrusted_inputs.py::test_export_instances_reads_a_parquet_benchmark_as_the_docs_say",
    "tests/core/test_run_names.py::test_run_exits_3_with_a_summary_when_something_ended_invalid_or_failed_and_0_when_allowed",
    "tests/core/test_run_names.py::test_judge_stage_judges_every_setup_file_and_reports_files_no_setup_names",
    "tests/judge/test_judge.py::test_cut_off_overall_answer_of_claude_is_asked_again",
    "tests/llm/test_batch.py::test_kill_9_while_polling_then_rerun_resumes_the_batch_instead_of_resubmitting",
    "tests/llm/test_batch.py::test_cocoeval_run_batch_gives_the_same_run_as_live",
    "tests/llm/test_batch.py::test_chunks_respect_the_request_and_byte_limits",
    "tests/llm/test_batch.py::test_cancelled_batches_fail_their_calls_and_the_next_run_sends_them_again",
    "tests/llm/test_batch.py::test_a_batch_the_provider_no_longer_knows_fails_its_calls_and_is_sent_again",
    "tests/llm/test_batch.py::test_a_cancel_that_fails_says_why_and_forget_stops_tracking",
    "tests/llm/test_cost_accounting.py::test_a_refused_answer_is_billed_so_its_tokens_and_cost_count",
    "tests/llm/test_cost_accounting.py::test_the_call_records_of_a_refused_call_keep_the_tokens_it_was_billed",
    "tests/llm/test_llm_claims.py::test_two_processes_on_one_cache_pay_for_each_call_once",
    "tests/llm/test_llm_claims.py::test_a_process_with_workers_and_one_without_share_one_cache",
    "tests/llm/test_llm_claims.py::test_a_call_held_by_a_live_owner_is_waited_for_not_sent",
    "tests/llm/test_llm_claims.py::test_a_call_that_timed_out_for_good_is_counted_as_paid_and_failed",
    "tests/llm/test_llm_claims.py::test_worker_processes_count_timed_out_attempts_as_paid_too",
    "tests/llm/test_llm_local.py",
    "tests/llm/test_llm_resume.py",
    "tests/llm/test_llm_runner.py::test_fatal_errors_stop_the_run_with_a_fix",
    "tests/llm/test_llm_runner.py::test_requests_per_minute_limit",
    "tests/llm/test_llm_runner.py::test_tokens_per_minute_limit",
    "tests/llm/test_llm_runner.py::test_keys_never_reach_cache_logs_or_outputs",
    "tests/llm/test_llm_workers.py::test_same_results_as_one_process_on_both_wire_formats",
    "tests/llm/test_llm_workers.py::test_a_worker_killed_midway_stops_the_run_and_is_replaced",
    "tests/llm/test_llm_workers.py::test_concurrency_limit_holds_across_workers",
    "tests/llm/test_llm_workers.py::test_rate_limit_holds_across_workers",
    "tests/llm/test_llm_workers.py::test_a_stopped_run_with_big_requests_leaves_no_cut_line_and_its_calls_are_accounted",
    "tests/llm/test_llm_workers.py::test_close_waits_for_calls_in_flight_and_every_sent_call_is_cached",
    "tests/llm/test_llm_workers.py::test_a_run_cancelled_while_waiting_for_a_stopped_runs_calls_leaves_the_runner_usable",
    "tests/llm/test_llm_workers.py::test_one_of_two_runs_on_a_loop_stops_and_the_other_finishes",
    "tests/llm/test_llm_workers.py::test_interrupting_a_run_in_a_notebook_stops_it",
    "tests/llm/test_llm_workers.py::test_close_during_a_run_is_refused_and_every_answer_is_cached",
    "tests/llm/test_secrets.py::test_an_echoed_key_reaches_no_result_cache_or_log",
    "tests/llm/test_secrets.py::test_cocoeval_run_writes_and_prints_no_echoed_key",
    "tests/llm/test_secrets.py::test_execute_notebooks_redacts_a_failed_notebook",
    "tests/notebooks/test_browser.py",
    "tests/notebooks/test_execute.py::test_two_at_a_time_the_same_copies_and_the_first_failure_raised",
    "tests/notebooks/test_execute.py::test_only_the_notebooks_named_whole_or_by_number_and_a_wrong_name_runs_nothing",
    "tests/notebooks/test_mimebundle.py::test_every_chart_compiles_and_draws_the_same_under_vega_lite_5",
    "tests/notebooks/test_notebooks.py::test_notebooks_are_what_the_generator_writes_and_their_code_lints",
    "tests/notebooks/test_notebooks.py::test_notebook_executes",
    "tests/notebooks/test_widgets.py::test_the_linked_charts_bundle_is_made_once_and_read_back_the_same",
    "tests/prompts/test_render.py::test_prompts_are_rendered_in_one_module_and_stages_do_not_import_each_other",
    "tests/run/test_estimate.py::test_forecast_matches_a_run_through_the_test_server",
    "tests/run/test_experiment.py::test_kill_9_then_rerun_repeats_no_call_and_gives_the_same_output",
    "tests/run/test_experiment.py::test_run_with_judges_and_human_annotation_cli",
    "tests/run/test_integrity_rundir.py::test_a_manifest_of_another_version_is_a_warning_in_the_report",
    "tests/run/test_integrity_rundir.py::test_a_valid_run_reports_no_warning",
    "tests/run/test_probes.py::test_a_killed_probe_run_resumes_without_sending_a_completed_call_twice",
    "tests/run/test_resume_kill.py",
    "tests/run/test_write_limits.py::test_a_file_size_limit_on_the_call_cache_is_named_with_its_limit",
    "tests/simulate/test_simulate.py::test_presence_penalty_variant_sent_only_where_supported",
    "tests/simulate/test_simulate_local.py",
)
"""The tests ``make check`` leaves out (marked ``slow`` here, in one place, beside the few marked
where they are written): a module, or a test function with all its parameters. They are the
longest: a subprocess run killed and resumed, worker processes, the local model, a notebook
kernel, the browser, a whole report. ``make test`` (CI) runs them all; docs/testing.md says how
the list was drawn, the threshold and what the split takes."""


DEMO_READERS = ("tests/analysis/test_convstats_reference.py",)
"""Tests that read the checkout's ``runs/demo`` without the ``demo_run`` fixture that makes it: with
``pytest -n 2 --dist loadgroup`` they run on the worker that makes it (``xdist_group("demo")``)."""


def _names(entry: str, nodeid: str) -> bool:
    return nodeid == entry or nodeid.startswith((entry + "::", entry + "["))


@pytest.hookimpl(tryfirst=True)
def pytest_collection_modifyitems(config, items):
    """Mark the tests of ``SLOW`` (before ``-m`` deselects), group the demo run's users on one
    pytest-xdist worker, and refuse an entry whose file is
    gone or, its file collected, that names no test: a renamed slow test would quietly join the
    fast loop."""
    collected = {item.nodeid.split("::")[0] for item in items}
    named = set()
    parallel = config.pluginmanager.hasplugin("xdist")
    for item in items:
        if parallel and ("demo_run" in getattr(item, "fixturenames", ()) or item.nodeid.startswith(DEMO_READERS)):
            item.add_marker(pytest.mark.xdist_group("demo"))  # one worker makes and reads runs/demo
        for entry in SLOW:
            if _names(entry, item.nodeid):
                item.add_marker(pytest.mark.slow)
                named.add(entry)
    stale = [
        e for e in SLOW if not (ROOT / e.split("::")[0]).is_file() or (e.split("::")[0] in collected and e not in named)
    ]
    if stale:
        raise pytest.UsageError(
            "tests/conftest.py: SLOW names no test: "
            + ", ".join(stale)
            + " (a test renamed, moved or removed: write its new name there, or drop the entry)"
        )


@pytest.fixture(autouse=True, scope="session")
def _keys_may_go_to_loopback():
    """Tests point ``openai/...@http://127.0.0.1:PORT`` and ``anthropic/...`` specs at the
    loopback fake server with fake keys in the environment: the documented opt-in lets a
    provider's key go to a loopback URL (without it, a provider's key goes to its own hosts only;
    tests/llm/test_secrets.py checks that rule with this variable removed). Subprocesses the tests
    start (``python -m cocoeval run``, worker processes) inherit it. Session-wide, so that
    module-scoped fixtures that run the pipeline have it too; a test that removes it with
    monkeypatch gets it back afterwards."""
    with pytest.MonkeyPatch.context() as mp:
        mp.setenv("COCOEVAL_ALLOW_KEY_TO_LOOPBACK", "1")
        yield


@pytest.fixture(autouse=True, scope="session")
def _cache_dir_of_the_session(tmp_path_factory):
    """The linked chart's JavaScript bundle (``notebooks.context.enable_offline``) is kept in a
    folder of this test session, never in the user's ``~/.cache``; kernels the tests start share it."""
    with pytest.MonkeyPatch.context() as mp:
        mp.setenv("COCOEVAL_CACHE_DIR", str(tmp_path_factory.mktemp("cocoeval-cache")))
        yield


@pytest.fixture(scope="module")
def server():
    """One fake provider server (OpenAI and Anthropic wire formats) per test module."""
    from tests.fakes.server import FakeServer

    with FakeServer() as srv:
        yield srv


@pytest.fixture
def srv(server, monkeypatch):
    """The module's fake server, reset (stats and script), with fake keys in the environment."""
    server.reset()
    monkeypatch.setenv("OPENAI_API_KEY", TEST_KEY)
    monkeypatch.setenv("ANTHROPIC_API_KEY", TEST_KEY)
    return server


def cached_keys(path: Path) -> set[str]:
    """The keys of the calls a call cache holds (empty while it does not exist or is being
    created): how the kill and interrupt tests see which calls completed."""
    if not path.exists():
        return set()
    try:
        db = sqlite3.connect(path, timeout=30)
        try:
            return {r[0] for r in db.execute("SELECT key FROM calls")}
        finally:
            db.close()
    except sqlite3.OperationalError:
        return set()
