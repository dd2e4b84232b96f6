"""The sentence encoder: the pinned model loads, vectors are unit length and mean what
the texts mean, and a file that is not the pinned one is refused."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest

from catalog import embedding
from catalog.embedding import (
    DIMENSIONS,
    Encoder,
    ModelUnavailable,
    content_key,
    quantize,
    tool_text,
)


@pytest.fixture(scope="module")
def encoder() -> Encoder:
    return Encoder(threads=1)


def test_vectors_are_unit_length_and_one_per_text(encoder: Encoder) -> None:
    texts = ["List pull requests", "", "a" * 5_000, "Créer une facture"]
    vectors = encoder.embed(texts)
    assert vectors.shape == (4, DIMENSIONS)
    assert vectors.dtype == np.float32
    np.testing.assert_allclose(np.linalg.norm(vectors, axis=1), 1.0, atol=1e-5)


_SAME_TEXTS = [f"operation number {i} " + "word " * (i % 17) for i in range(40)]
_VECTORS_OF = (
    "import sys; from catalog.embedding import Encoder; "
    "sys.stdout.buffer.write(Encoder(threads=1).embed(sys.stdin.read().split('\\n')).tobytes())"
)


def test_a_text_gets_byte_identical_vectors_across_encoders_and_processes(
    encoder: Encoder,
) -> None:
    # What the vector store relies on: a text embedded once is its vector for good (the
    # indexer reuses it by content key, a server embeds queries on its own), so a fresh
    # encoder in this process and another process must give the very same bytes.
    here = encoder.embed(_SAME_TEXTS).tobytes()
    assert Encoder(threads=1).embed(_SAME_TEXTS).tobytes() == here  # a restart
    other = subprocess.run(
        [sys.executable, "-c", _VECTORS_OF],
        input="\n".join(_SAME_TEXTS).encode(),
        capture_output=True,
        check=True,
        cwd=Path(__file__).resolve().parents[2],
        timeout=120,
    )
    assert other.stdout == here  # another process


def test_a_request_is_nearest_the_tool_that_does_it(encoder: Encoder) -> None:
    tools = [
        tool_text(
            title="List pull requests",
            name="pulls/list",
            path="/repos/{o}/{r}/pulls",
            tags=["pulls"],
            description="Lists pull requests in a repository.",
        ),
        tool_text(
            title="Delete a webhook",
            name="repos/delete-webhook",
            path="/repos/{o}/{r}/hooks/{id}",
            tags=["repos"],
            description="",
        ),
        tool_text(
            title="Create a customer",
            name="PostCustomers",
            path="/v1/customers",
            tags=["customers"],
            description="Creates a new customer object.",
        ),
    ]
    vectors = encoder.embed(tools)
    for request, expected in [
        ("show me the open PRs of my repository", 0),
        ("remove the hook that posts to our CI", 1),
        ("sign up a new client with their email", 2),
    ]:
        scores = vectors @ encoder.embed([request])[0]
        assert int(np.argmax(scores)) == expected, (request, scores)


def test_tool_text_says_title_name_path_tags_then_description() -> None:
    text = tool_text(
        title="List pull requests",
        name="pulls/list-requested-reviewers",
        path="/repos/{owner}/{repo}/pulls",
        tags=["pulls", "code review"],
        description="x " * 500,
    )
    assert text.startswith(
        "List pull requests. pulls list requested reviewers. "
        "repos owner repo pulls. pulls, code review. "
    )
    assert text.endswith("x x")
    assert len(text.split(". ")[-1]) <= embedding.DESCRIPTION_CHARS


def test_tool_text_reads_the_description_as_words_without_the_title_again() -> None:
    """Markup, links and a repeated summary used to spend the description's budget."""
    text = tool_text(
        title="Create a phone site.",
        name="createPhoneSite",
        path="/phone/sites",
        tags=[],
        description=(
            "Create a phone site\n\nSites organize **Zoom Phone** users. Use this API to "
            "create a [Site](https://support.zoom.us/hc/articles/360020809672).<br>\n"
            "See https://marketplace.zoom.us/docs/rate-limits for limits."
        ),
    )
    assert text == (
        "Create a phone site. create phone site. phone sites. Sites organize Zoom Phone "
        "users. Use this API to create a Site. See for limits."
    )


def test_tool_text_cuts_the_description_at_a_word() -> None:
    text = tool_text(title="T", name="t", path="/t", tags=[], description="word " * 100)
    lead = text.split(". ", 3)[-1]
    assert lead.endswith("word")
    assert len(lead) <= embedding.DESCRIPTION_CHARS


def test_a_description_that_only_repeats_the_title_adds_nothing() -> None:
    text = tool_text(
        title="Get a user", name="users/get", path="/u", tags=[], description="Get a user."
    )
    assert text == "Get a user. users get. u"


def test_content_key_names_text_and_model() -> None:
    assert content_key("a") == content_key("a")
    assert content_key("a") != content_key("b")
    assert len(content_key("a")) == 16


def test_quantize_keeps_the_ranking(encoder: Encoder) -> None:
    vectors = encoder.embed([f"tool {i} does thing {i * 7}" for i in range(40)])
    query = encoder.embed(["tool 3 does thing 21"])[0]
    exact = np.argsort(-(vectors @ query))[:5]
    approx = np.argsort(-(quantize(vectors).astype(np.float32) @ query))[:5]
    assert exact[0] == approx[0]
    assert len(set(exact) & set(approx)) >= 4


def test_a_model_file_that_is_not_the_pinned_one_is_refused(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.setattr(embedding, "MODEL_SHA256", "0" * 64)
    with pytest.raises(ModelUnavailable, match="not the pinned"):
        Encoder()


def test_the_session_never_spins_and_keeps_no_arena(encoder: Encoder) -> None:
    # Spinning intra-op threads burned the core the event loop and the other server
    # worker needed; an arena kept the largest batch's buffers for the process's life.
    import onnxruntime

    options = encoder._session.get_session_options()
    assert options.get_session_config_entry("session.intra_op.allow_spinning") == "0"
    assert options.get_session_config_entry("session.inter_op.allow_spinning") == "0"
    assert not options.enable_cpu_mem_arena
    assert not options.enable_mem_pattern
    assert options.intra_op_num_threads == 1
    assert options.inter_op_num_threads == 1
    assert options.execution_mode == onnxruntime.ExecutionMode.ORT_SEQUENTIAL
    # The graph the vectors come from: the indexer's and the server's must match.
    assert options.graph_optimization_level == onnxruntime.GraphOptimizationLevel.ORT_ENABLE_ALL


_RESIDENT = """
import sys
import numpy, onnxruntime, tokenizers
from catalog.embedding import Encoder


def anon() -> int:
    with open("/proc/self/status") as status:
        line = next(x for x in status if x.startswith("RssAnon:"))
    return int(line.split()[1]) // 1024


before = anon()
encoder = Encoder(threads=1)
encoder.embed(["list the open pull requests of a repository"])
print(anon() - before)
"""


@pytest.mark.skipif(not Path("/proc/self/status").is_file(), reason="reads /proc")
def test_a_loaded_encoder_gives_back_what_building_its_session_freed() -> None:
    # The weights dequantised to float32 are about 90 MiB; building the session freed
    # about 60 MiB more of temporary copies that glibc kept mapped until told to trim.
    run = subprocess.run(
        [sys.executable, "-c", _RESIDENT], capture_output=True, text=True, check=True
    )
    grown = int(run.stdout.strip())
    assert grown < 150, f"the encoder holds {grown} MiB of anonymous memory"
