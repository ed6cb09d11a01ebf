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
write, sorted once per change of a key's items, and each page is handed to
moto's own query cut to its start key and, when nothing is filtered after
the sort, to as many items as it can hold: what an index is for. A page's items are copied one
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
import gc
import json
from decimal import Decimal
import sys
import threading

import moto.dynamodb.models as dynamodb_models
from moto.dynamodb.models import DynamoDBBackend
import moto.dynamodb.models.table as table_models
from moto.dynamodb.models.dynamo_type import DynamoType, Item
from moto.dynamodb.models.table import GlobalSecondaryIndex, Table
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


def _written_by(backend, transact_items):
    """(table, hash key, range key) of every item a transaction writes;
    entries moto's own checks refuse are left to them."""
    written = []
    for entry in transact_items:
        try:
            op_type, op = next(iter(entry.items()))
            if op_type == "ConditionCheck":  # checks, never writes
                continue
            table = backend.tables.get(op.get("TableName"))
            if table is None:
                continue
            keys = op["Item"] if "Item" in op else op["Key"]
            hash_key, range_key = backend.get_keys_value(table, keys)
        except Exception:  # moto's own checks answer a malformed entry
            continue
        written.append((table, hash_key, range_key))
    return written


def transact_write_items(self, transact_items):
    saved = [
        (table, hash_key, range_key, copy.deepcopy(table.get_item(hash_key, range_key)))
        for table, hash_key, range_key in _written_by(self, transact_items)
    ]
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
    return [
        (table, [(hash_key, range_key)])
        for table, hash_key, range_key in _written_by(self, transact_items)
    ]


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


def _settle_heap():
    """Takes what the server holds now out of Python's cyclic collector
    (`gc.freeze`, which splices lists, whatever their length). Items are
    freed by their counts as before; what freezing spares is a full
    collection walking every item of every table, which grows with the
    tables (seconds at a million orders) and stops every request
    meanwhile."""
    gc.freeze()


def _sort_attrs(table, index_name):
    """The attributes moto sorts a query of `index_name` by, as its own
    query works them out, and the index's sort key."""
    index = table.get_index(index_name)
    hash_keys = [k["AttributeName"] for k in index.schema if k["KeyType"] == "HASH"]
    range_keys = [k["AttributeName"] for k in index.schema if k["KeyType"] == "RANGE"]
    hash_attrs = hash_keys + [table.hash_key_attr]
    if range_keys:
        range_attrs = range_keys + [table.range_key_attr]
        index_range = range_keys[0]
    elif isinstance(index, GlobalSecondaryIndex) and table.range_key_attr:
        range_attrs = [table.range_key_attr, table.range_key_attr]
        index_range = table.range_key_attr
    else:
        range_attrs = [table.hash_key_attr, table.range_key_attr]
        index_range = table.hash_key_attr
    return table._generate_attr_to_sort_by(hash_attrs, range_attrs), index_range


def _native(value):
    """A sort key that orders as the `DynamoType` does, for strings and
    numbers; anything else is not sorted natively."""
    if value.type == "S":
        return value.value
    if value.type == "N":
        return Decimal(value.value)
    raise TypeError(value.type)


def _sorted(table, items, attrs):
    try:
        return sorted(items, key=lambda i: tuple(_native(i.attrs[a]) for a in attrs))
    except (KeyError, TypeError, ArithmeticError):
        return sorted(items, key=lambda i: tuple(i.attrs[a] for a in attrs))


class _Narrowed:
    """A table as moto's query sees it: its items are those under the
    queried index key from the page's start key on, and when nothing is
    filtered out after the sort, only as many as the page can hold and one
    more (which tells moto there is a next page). The key's items are
    sorted once per change of them."""

    def __init__(self, table, items, entry, group, version, page):
        self._table = table
        self._items = items
        self._entry = entry
        self._group = group
        self._version = version
        self._page = page

    def all_items(self):
        page = self._page
        attrs, index_range = _sort_attrs(self._table, page["index_name"])
        with _index_lock:
            cached = self._entry["sorted"].get(self._group)
        if cached is not None and cached[0] == self._version:
            order, positions = cached[1], cached[2]
        else:
            order = _sorted(self._table, self._items, attrs)
            positions = {
                _item_key(item.hash_key, item.range_key): n for n, item in enumerate(order)
            }
            with _index_lock:
                if self._entry["versions"].get(self._group, 0) == self._version:
                    self._entry["sorted"][self._group] = (self._version, order, positions)
            _settle_heap()
        forward = page["forward"]
        low, high = 0, len(order)
        at = self._start_of(page["start_key"], order, positions, attrs)
        if at is not None:
            # moto skips every item up to the start key: start past it.
            low, high = (at + 1, high) if forward else (low, at)
        limit = page["limit"]
        if not page["exact"] or not isinstance(limit, int) or limit <= 0:
            return order[low:high]
        comparison, objs = page["comparison"], page["objs"]
        range_attr = page["range_attr"] or index_range
        conditions = page["conditions"]
        out, matched = [], 0
        for n in range(low, high) if forward else range(high - 1, low - 1, -1):
            item = order[n]
            out.append(item)
            if matched == limit:
                break
            # What moto's loop counts: the key still the queried one, and
            # the sort key's condition met.
            if any(item.attrs.get(name) != value for name, value in conditions):
                continue
            if comparison:
                value = item.attrs.get(range_attr)
                if not value or not value.compare(comparison, objs):
                    continue
            matched += 1
        return out

    def _start_of(self, start_key, order, positions, attrs):
        """The position of the page's start key among the sorted items, if
        the item there has every sort value the start key names."""
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
        for name in attrs:
            if name in start_key and item.attrs.get(name) != DynamoType(start_key[name]):
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
            _settle_heap()
        group_key = tuple(_value_key(v) for _, v in conditions)
        items = list(entry["groups"].get(group_key, {}).values())
        version = entry["versions"].get(group_key, 0)
    range_conditions = named.get("range_key_conditions") or []
    page = {
        "index_name": index_name,
        "start_key": named.get("exclusive_start_key"),
        "forward": named.get("scan_index_forward", True) is not False,
        "limit": named.get("limit"),
        "comparison": named.get("range_comparison"),
        "objs": named.get("range_objs") or [],
        "range_attr": range_conditions[-1][0] if range_conditions else None,
        "conditions": list(conditions),
        # Only with no filter of moto's older interface and no equality on
        # a second sort key does the page end where the count says.
        "exact": len(range_conditions) <= 1
        and not (set(kwargs) - set(_QUERY_ARGS) - {"hash_key_conditions", "range_key_conditions"}),
    }
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
