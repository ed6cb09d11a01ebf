"""moto's server, its DynamoDB transactions undone item by item.

moto 5 backs up every table a TransactWriteItems touches by deep-copying the
whole table (once per item of the transaction) and, when the transaction is
cancelled, puts the copies back. A transaction then costs time and memory in
proportion to its tables (a 10,000-order drain grew the server past 13 GB
and a transaction took seconds), and the restore undoes every write other
requests made meanwhile. Here a transaction keeps a copy of only the items
it names and, when cancelled, puts back only those: what a cancelled
transaction means on DynamoDB.

Run with the Python that has moto installed, with moto_server's arguments:
    python3 infra/moto/server.py -H 127.0.0.1 -p 4566
"""

import copy
import sys

import moto.dynamodb.models as dynamodb_models
from moto.dynamodb.models import DynamoDBBackend
from moto.dynamodb.models.table import Table
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

if __name__ == "__main__":
    sys.exit(main())
