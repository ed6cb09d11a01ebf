"""moto's server, its DynamoDB transactions undone item by item.

moto 5 backs up every table a TransactWriteItems touches by deep-copying the
whole table (once per item of the transaction) and, when the transaction is
cancelled, puts the copies back. A transaction then costs time and memory in
proportion to its tables (a 10,000-order drain grew the server past 13 GB
and a transaction took seconds), and the restore undoes every write other
requests made meanwhile. Here a transaction keeps a copy of only the items
it names and, when cancelled, puts back only those: what a cancelled
transaction means on DynamoDB.

moto also answers a query of a global secondary index by reading every item
of the table, sorting those that match and skipping to the page's start,
for every page: paging through a sale of a million orders would take hours.
Here the items under an index key are found once and filed again by every
write, sorted once per change of a key's items, and each page is cut where
its start key is: what an index is for. A page's items are copied one
level deep (each item's own attribute map), not deep-copied value by value:
nothing changes an attribute's value in place, only replaces it. Which
items a page returns, in which order, is moto's own code's answer. And a
query's answer, already plain JSON values, is written with `json`, not
passed through moto's model-driven serializer, which took four fifths of a
page's time.

Run with the Python that has moto installed, with moto_server's arguments:
    python3 infra/moto/server.py -H 127.0.0.1 -p 4566
"""

import copy
import json
import sys
import threading

import moto.dynamodb.models as dynamodb_models
from moto.dynamodb.models import DynamoDBBackend
import moto.dynamodb.models.table as table_models
from moto.dynamodb.models.dynamo_type import DynamoType, Item
from moto.dynamodb.models.table import Table
from moto.dynamodb.responses import DynamoHandler
from moto.server import main


class _TablesUncopied:
    """`copy` as moto's DynamoDB backend sees it: a table is not copied (its
    transaction's items are, below); anything else is."""

    @staticmethod
    def deepcopy(value, memo=None):
        if isinstance(value, Table):
            return value
        return copy.deepcopy(value, memo)

    def __getattr__(self, name):
        return getattr(copy, name)


dynamodb_models.copy = _TablesUncopied()
_transact_write_items = DynamoDBBackend.transact_write_items


def _put_back(table, hash_key, range_key, item):
    if range_key is not None:
        if item is None:
            table.items.get(hash_key, {}).pop(range_key, None)
        else:
            table.items[hash_key][range_key] = item
    elif item is None:
        table.items.pop(hash_key, None)
    else:
        table.items[hash_key] = item


def transact_write_items(self, transact_items):
    saved = []
    for entry in transact_items:
        try:
            op_type, op = next(iter(entry.items()))
            if op_type == "ConditionCheck":  # checks, never writes
                continue
            table = self.tables.get(op.get("TableName"))
            if table is None:
                continue
            keys = op["Item"] if "Item" in op else op["Key"]
            hash_key, range_key = self.get_keys_value(table, keys)
            current = table.get_item(hash_key, range_key)
        except Exception:  # moto's own checks answer a malformed entry
            continue
        saved.append((table, hash_key, range_key, copy.deepcopy(current)))
    try:
        return _transact_write_items(self, transact_items)
    except Exception:
        for table, hash_key, range_key, item in reversed(saved):
            _put_back(table, hash_key, range_key, item)
        raise


DynamoDBBackend.transact_write_items = transact_write_items

# The items under each key of each index queried so far:
# {(table id, index, key names): {"groups": {key values: {item key: Item}},
# "members": {item key: key values}}}. Built by one pass over the table at
# the first query of an index and kept by every write after it, which files
# the items it named again as the table now holds them. A query may see an
# item a write is changing, as on DynamoDB; moto's own query checks the key
# of every item it is given, so an item that has left a key is never
# answered under it.
_index_cache = {}
_index_lock = threading.Lock()


def _value_key(value):
    return (value.type, repr(value.value))


def _item_key(hash_key, range_key):
    return (_value_key(hash_key), None if range_key is None else _value_key(range_key))


def _changed(entry, group):
    entry["versions"][group] = entry["versions"].get(group, 0) + 1
    entry["sorted"].pop(group, None)


def _file(entry, names, ik, item):
    old = entry["members"].pop(ik, None)
    if old is not None:
        entry["groups"].get(old, {}).pop(ik, None)
        _changed(entry, old)
    if item is None:
        return
    values = [item.attrs.get(name) for name in names]
    if all(value is not None for value in values):
        group = tuple(map(_value_key, values))
        entry["groups"].setdefault(group, {})[ik] = item
        entry["members"][ik] = group
        _changed(entry, group)


def _refile(table, keys):
    """Files the items at `keys` ((hash, range) pairs) of `table` again in
    every index cache of the table."""
    with _index_lock:
        entries = [(k, e) for k, e in _index_cache.items() if k[0] == id(table)]
        for (_, _, names), entry in entries:
            for hash_key, range_key in keys:
                try:
                    item = table.get_item(hash_key, range_key)
                except Exception:  # a key moto refuses names no item
                    item = None
                _file(entry, names, _item_key(hash_key, range_key), item)


def _named_keys(backend, table_name, keys):
    try:
        table = backend.get_table(table_name)
        return table, [backend.get_keys_value(table, keys)]
    except Exception:  # moto answers the malformed request itself
        return None, []


def _refiling(method, keys_of):
    def call(self, *args, **kwargs):
        try:
            return method(self, *args, **kwargs)
        finally:
            for table, keys in keys_of(self, *args, **kwargs):
                if table is not None:
                    _refile(table, keys)

    return call


def _single(self, table_name, keys, *_args, **_kwargs):
    return [_named_keys(self, table_name, keys)]


def _transacted(self, transact_items, *_args, **_kwargs):
    named = []
    for entry in transact_items:
        try:
            op_type, op = next(iter(entry.items()))
        except Exception:
            continue
        if op_type == "ConditionCheck":
            continue
        keys = op.get("Item") if "Item" in op else op.get("Key")
        if keys is not None:
            named.append(_named_keys(self, op.get("TableName"), keys))
    return named


def _forgetting(method):
    def call(self, *args, **kwargs):
        try:
            return method(self, *args, **kwargs)
        finally:
            with _index_lock:
                _index_cache.clear()

    return call


for _name in ("put_item", "update_item", "delete_item"):
    setattr(DynamoDBBackend, _name, _refiling(getattr(DynamoDBBackend, _name), _single))
DynamoDBBackend.transact_write_items = _refiling(
    DynamoDBBackend.transact_write_items, _transacted
)
for _name in (
    "create_table",
    "delete_table",
    "update_table",
    "update_table_global_indexes",
):
    setattr(DynamoDBBackend, _name, _forgetting(getattr(DynamoDBBackend, _name)))


class _Narrowed:
    """A table as moto's query sees it, whose items are only those under
    the queried index key, sorted as moto sorts them once per change of
    that key's items, and cut where the page starts."""

    def __init__(self, table, items, entry, group, version, page):
        self._table = table
        self._items = items
        self._entry = entry
        self._group = group
        self._version = version
        # (exclusive start key, forward, at most this many items or None)
        self._page = page

    def all_items(self):
        return self._items

    def sorted_items(self, hash_attrs, range_attrs, items):
        attrs = (tuple(hash_attrs), tuple(range_attrs))
        with _index_lock:
            cached = self._entry["sorted"].get(self._group)
        if cached is not None and cached[0] == self._version and cached[1] == attrs:
            order, positions = cached[2], cached[3]
        else:
            order = self._table.sorted_items(hash_attrs, range_attrs, list(self._items))
            positions = {
                _item_key(item.hash_key, item.range_key): n for n, item in enumerate(order)
            }
            with _index_lock:
                if self._entry["versions"].get(self._group, 0) == self._version:
                    self._entry["sorted"][self._group] = (self._version, attrs, order, positions)
        wanted = {id(item) for item in items}
        start_key, forward, most = self._page
        low, high = 0, len(order)
        at = self._start_of(start_key, order, positions, hash_attrs, range_attrs)
        if at is not None:
            # moto skips every item up to the start key: start past it.
            low, high = (at + 1, high) if forward else (low, at)
        if most is not None:
            # The page's items and one more, which tells moto there is a
            # next page: with no filter, moto reads no further.
            low, high = (low, min(high, low + most)) if forward else (max(low, high - most), high)
        return [item for item in order[low:high] if id(item) in wanted]

    def _start_of(self, start_key, order, positions, hash_attrs, range_attrs):
        """The position of the page's start key among the sorted items, if
        an item there has every key value the start key names."""
        if not start_key:
            return None
        table = self._table
        try:
            hash_key = DynamoType(start_key[table.hash_key_attr])
            range_key = (
                DynamoType(start_key[table.range_key_attr]) if table.range_key_attr else None
            )
        except Exception:
            return None
        at = positions.get(_item_key(hash_key, range_key))
        if at is None:
            return None
        item = order[at]
        for name in list(hash_attrs) + list(range_attrs):
            if name is None or name not in start_key:
                continue
            if item.attrs.get(name) != DynamoType(start_key[name]):
                return None
        return at

    def __getattr__(self, name):
        return getattr(self._table, name)


class _PageCopiedShallow:
    """`copy` as moto's table sees it: a query's page (a list of items) is
    copied item by item, each with its own attribute map; anything else as
    before."""

    @staticmethod
    def deepcopy(value, memo=None):
        if isinstance(value, list) and all(isinstance(i, Item) for i in value):
            page = []
            for item in value:
                shallow = copy.copy(item)
                shallow.attrs = dict(item.attrs)
                page.append(shallow)
            return page
        return copy.deepcopy(value, memo)

    def __getattr__(self, name):
        return getattr(copy, name)


table_models.copy = _PageCopiedShallow()
_query = Table.query


_QUERY_ARGS = (
    "hash_key",
    "range_comparison",
    "range_objs",
    "limit",
    "exclusive_start_key",
    "scan_index_forward",
    "projection_expressions",
    "index_name",
    "consistent_read",
    "filter_expression",
)


def query(self, *args, **kwargs):
    named = dict(zip(_QUERY_ARGS, args))
    named.update(kwargs)
    index_name = named.get("index_name")
    conditions = named.get("hash_key_conditions")
    if not index_name or not conditions:
        return _query(self, *args, **kwargs)
    names = tuple(name for name, _ in conditions)
    key = (id(self), index_name, names)
    with _index_lock:
        entry = _index_cache.get(key)
        if entry is None:
            # Every key of the index at once, under the lock so that no
            # write's filing falls between the pass and its keeping.
            entry = {"groups": {}, "members": {}, "versions": {}, "sorted": {}}
            for item in self.all_items():
                _file(entry, names, _item_key(item.hash_key, item.range_key), item)
            _index_cache[key] = entry
        group_key = tuple(_value_key(v) for _, v in conditions)
        items = list(entry["groups"].get(group_key, {}).values())
        version = entry["versions"].get(group_key, 0)
    limit = named.get("limit")
    # Only with nothing to filter out after the sort is a page's end known
    # before moto reads it.
    unfiltered = not named.get("range_comparison") and not (
        set(kwargs) - set(_QUERY_ARGS) - {"hash_key_conditions", "range_key_conditions"}
    )
    page = (
        named.get("exclusive_start_key"),
        named.get("scan_index_forward", True) is not False,
        limit + 1 if unfiltered and isinstance(limit, int) and limit > 0 else None,
    )
    narrowed = _Narrowed(self, items, entry, group_key, version, page)
    return _query(narrowed, *args, **kwargs)


Table.query = query
_handler_query = DynamoHandler.query


def handler_query(self):
    answer = _handler_query(self)
    result = getattr(answer, "result", None)
    if isinstance(answer, str) or not isinstance(result, dict):
        return answer
    try:
        return json.dumps({k: v for k, v in result.items() if v is not None})
    except (TypeError, ValueError):  # bytes, say: moto's serializer encodes them
        return answer


DynamoHandler.query = handler_query

if __name__ == "__main__":
    sys.exit(main())
