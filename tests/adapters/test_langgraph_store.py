"""`MemoryScopeStore`: LangGraph's BaseStore over the engine, used the way LangGraph and LangMem use it."""

from __future__ import annotations

import pytest

pytest.importorskip("langgraph.store.base", reason="pip install 'memoryscope-plugins[langchain]'")

from langchain_core.messages import AIMessage
from langgraph.store.base import SearchItem

from memoryscope_plugins.adapters.langgraph_store import MemoryScopeStore


def test_put_get_update_delete_and_search(engine):
    store = MemoryScopeStore(engine)
    store.put(("anna", "memories"), "dog", {"content": "Anna's dog is called Biscuit.", "kind": "pet"})
    store.put(("anna", "memories"), "job", {"content": "Anna works as a nurse.", "kind": "work"})
    store.put(("anna", "profile"), "city", {"city": "Lisbon"})
    store.put(("bob", "memories"), "dog", {"content": "Bob's dog is called Rex."})
    item = store.get(("anna", "memories"), "dog")
    assert item.value == {"content": "Anna's dog is called Biscuit.", "kind": "pet"} and item.key == "dog"
    assert item.namespace == ("anna", "memories")
    hits = store.search(("anna", "memories"), query="What is my dog called?")
    assert hits[0].key == "dog" and hits[0].score is not None
    assert all("Rex" not in h.value.get("content", "") for h in hits)
    assert [h.key for h in store.search(("anna",), filter={"kind": "work"})] == ["job"]
    listed = store.search(("anna",))
    assert {h.key for h in listed} == {"dog", "job", "city"}
    # BaseStore.search returns SearchItems; without a query their score is None (as in langgraph's InMemoryStore)
    assert all(isinstance(h, SearchItem) and h.score is None for h in listed)
    store.put(("anna", "memories"), "dog", {"content": "Anna's dog is called Pretzel."})
    assert store.get(("anna", "memories"), "dog").value["content"] == "Anna's dog is called Pretzel."
    assert engine.count("anna") == 3  # updated in place, not duplicated
    store.delete(("anna", "memories"), "dog")
    assert store.get(("anna", "memories"), "dog") is None
    assert store.list_namespaces(prefix=("anna",)) == [("anna", "memories"), ("anna", "profile")]
    assert ("bob", "memories") in store.list_namespaces()


async def test_async_twins(engine):
    store = MemoryScopeStore(engine, user_index=-1)
    await store.aput(("memories", "anna"), "k1", {"content": "Anna is allergic to peanuts."})
    assert (await store.aget(("memories", "anna"), "k1")).value["content"] == "Anna is allergic to peanuts."
    assert [h.key for h in await store.asearch(("memories", "anna"), query="peanut allergy")] == ["k1"]
    assert engine.list("anna")[0].content == "Anna is allergic to peanuts."


def test_invalid_namespace(engine):
    from langgraph.store.base import InvalidNamespaceError
    store = MemoryScopeStore(engine, user_index=2)
    with pytest.raises(InvalidNamespaceError):
        store.put(("anna",), "k", {"content": "x"})


def test_langmem_tools_run_over_the_store(engine):
    pytest.importorskip("langmem", reason="pip install 'memoryscope-plugins[langchain]' (langmem)")
    from langmem import create_manage_memory_tool, create_search_memory_tool
    store = MemoryScopeStore(engine, user_index=-1)
    manage = create_manage_memory_tool(namespace=("memories", "{langgraph_user_id}"), store=store)
    search = create_search_memory_tool(namespace=("memories", "{langgraph_user_id}"), store=store)
    config = {"configurable": {"langgraph_user_id": "anna"}}
    manage.invoke({"action": "create", "content": "Anna prefers window seats."}, config=config)
    found = search.invoke({"query": "seat preference"}, config=config)
    assert "window seats" in str(found)
    memory_id = engine.list("anna")[0].metadata["langgraph"]["key"]
    manage.invoke({"action": "update", "id": memory_id, "content": "Anna prefers aisle seats."}, config=config)
    assert [m.content for m in engine.list("anna")] == ["Anna prefers aisle seats."]
    manage.invoke({"action": "delete", "id": memory_id}, config=config)
    assert engine.count("anna") == 0
    assert "seats" not in str(search.invoke({"query": "seat"}, config={"configurable": {"langgraph_user_id": "bob"}}))


def test_create_agent_with_the_store_and_langmem_tools(engine):
    pytest.importorskip("langmem", reason="pip install 'memoryscope-plugins[langchain]' (langmem)")
    from langchain.agents import create_agent
    from langmem import create_manage_memory_tool

    from tests.adapters.test_langchain import ToolCallingModel
    store = MemoryScopeStore(engine, user_index=-1)
    save = AIMessage(content="", tool_calls=[{"name": "manage_memory", "id": "c1",
                                              "args": {"action": "create", "content": "Anna's birthday is May 3."}}])
    model = ToolCallingModel(messages=iter([save, AIMessage(content="Saved.")]))
    agent = create_agent(model, [create_manage_memory_tool(namespace=("memories", "{langgraph_user_id}"))],
                         store=store)
    result = agent.invoke({"messages": [{"role": "user", "content": "My birthday is May 3."}]},
                          config={"configurable": {"langgraph_user_id": "anna"}})
    assert result["messages"][-1].content == "Saved."
    assert [m.content for m in engine.list("anna")] == ["Anna's birthday is May 3."]
    assert store.search(("memories", "anna"), query="When is my birthday?")[0].value["content"] == \
        "Anna's birthday is May 3."
