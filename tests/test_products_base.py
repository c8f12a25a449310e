"""The products' shared base (``memory/products/base.py``): each product's offline twin bound by
its class, the snapshot layout, the bridge thread and the pinned clock, on a stand-in product
(no product installed or imported)."""

from __future__ import annotations

import asyncio
import importlib
import json
import tarfile
from pathlib import Path

import pytest

from mnemoflow.llm.offline import HANDLERS
from mnemoflow.memory.base import SYSTEMS
from mnemoflow.memory.products import base


def product_classes() -> dict[str, type[base.Product]]:
    SYSTEMS.names()  # imports the built-in systems, the products' adapters among them
    return {
        name: cls for name in SYSTEMS.names() if issubclass(cls := SYSTEMS.get(name), base.Product)
    }


def test_every_product_names_its_offline_twin_and_the_twin_answers_its_tasks_only():
    classes = product_classes()
    assert set(classes) == {"a_mem", "graphiti", "langmem", "mem0_graph", "mem0_paper", "memoryos"}
    bound: dict[str, set[str]] = {}
    for name, cls in classes.items():
        handlers = cls.offline_handlers()  # every task: a handler of the class's twin module
        assert set(handlers) == set(cls.offline_tasks) and handlers, name
        bound.setdefault(cls.offline, set()).update(cls.offline_tasks)
    for module, tasks in bound.items():
        importlib.import_module(module)
        answered = {task for task, handler in HANDLERS.items() if handler.__module__ == module}
        assert answered == tasks, module  # no handler that no product's class names


def test_a_task_the_twin_does_not_answer_is_an_error_naming_it():
    class Unbound(Toy):
        offline, offline_tasks = "mnemoflow.llm.offline.a_mem", ("a_mem_analyze", "a_mem_dream")

    with pytest.raises(LookupError, match="mnemoflow.llm.offline.a_mem answers no 'a_mem_dream'"):
        Unbound.offline_handlers()


class Toy(base.ThreadProduct):
    """A stand-in product: one text file per message in its folder, a pinned clock."""

    name = "toy"
    product, distribution, version = "Toy", "toy-memory", "1.0"
    snapshot, state_file, folder_prefix = "toy.tar.gz", "toy_state.json", "mnemoflow-toy-"
    state_keys = ("now", "writer_calls")
    thread_name = "toy"

    def __init__(self, params=None, llm=None, seed=0):
        super().__init__(params, llm, seed)
        self.now = ""

    def _modules(self):
        return None

    def _construct(self, folder: Path):
        return folder

    async def _write(self, messages):
        folder = await self._open()
        for message in messages:
            await self._in_thread(self._note, folder, message)

    def _note(self, folder: Path, message) -> None:
        self.now = base.formatted_time(message.time, "%Y%m%d") or self.now
        clock = Toy.running().now  # what a product's patched clock reads
        (folder / f"{message.turn_id}.txt").write_text(f"{clock} {message.content}")
        self.writer_calls += 1

    async def _search(self, query, k):
        folder = await self._open()
        return sorted(p.read_text() for p in folder.iterdir())[:k]


def _messages():
    from tests.products_fixtures import CONVERSATION

    return CONVERSATION[:2]


def test_the_snapshot_is_the_state_file_and_the_folder_as_one_tar(tmp_path):
    memory = Toy()
    asyncio.run(memory.add(_messages()))
    memory.save(tmp_path)
    state = json.loads((tmp_path / "toy_state.json").read_text())
    assert state == {"version": "1.0", "now": "20230508", "writer_calls": 2}
    with tarfile.open(tmp_path / "toy.tar.gz", "r:gz") as archive:
        assert archive.getnames() == ["D1:1.txt", "D1:2.txt"]  # the folder's files at the top
    loaded = Toy()
    loaded.load(tmp_path)
    assert (loaded.now, loaded.writer_calls) == ("20230508", 2)
    answers = asyncio.run(loaded.retrieve("", 5))
    assert answers == [
        "20230508 I adopted a beagle named Biscuit.",
        "20230508 My favorite color is teal.",
    ]
    assert loaded._folder.name != memory._folder.name  # a fresh private folder


def test_an_empty_memory_saves_its_state_only_and_loads(tmp_path):
    Toy().save(tmp_path)
    assert sorted(p.name for p in tmp_path.iterdir()) == ["toy_state.json"]
    loaded = Toy()
    loaded.load(tmp_path)
    assert loaded._folder is None and loaded.writer_calls == 0


def test_a_snapshot_of_another_version_is_a_one_line_error_naming_the_file(tmp_path):
    (tmp_path / "toy_state.json").write_text(json.dumps({"version": "0.9"}))
    with pytest.raises(ValueError) as error:
        Toy().load(tmp_path)
    assert str(error.value) == (
        f"{tmp_path / 'toy_state.json'}: version: a toy-memory 0.9 snapshot, this is 1.0"
    )


def test_the_product_thread_raises_what_a_bridge_recorded_and_its_clock_needs_an_owner():
    memory = Toy()

    def swallowing():  # a product that catches every error of its model calls
        try:
            with memory.recording():
                raise ConnectionError("the endpoint is down")
        except ConnectionError:
            return "degraded"

    with pytest.raises(ConnectionError, match="the endpoint is down"):
        asyncio.run(memory._in_thread(swallowing))
    assert memory.failure is None  # raised once, then cleared
    with pytest.raises(RuntimeError, match="Toy ran outside the mnemoflow adapter"):
        Toy.running()


def test_a_product_is_patched_once_per_process():
    calls = []
    for _ in range(3):
        base.patch_once("toy-test", calls.append, "patched")
    assert calls == ["patched"]


def test_a_products_time_is_the_conversations_in_its_format():
    assert base.formatted_time("2023-05-08T13:56", "%Y%m%d%H%M") == "202305081356"
    assert base.formatted_time(" 8 May, 2023 ", "%Y%m%d%H%M") == "8 May, 2023"
    assert base.conversation_time("8 May, 2023") is None
