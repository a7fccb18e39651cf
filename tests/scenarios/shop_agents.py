"""A shop whose `charge(order)` a crash can refuse, for the `per_accepted_call` count.

`charge` settles what an earlier, refused charge left pending, then marks the order pending,
waits for the payment provider, charges (a row, then a `shop:charged` record, in one turn)
and, a turn later, clears the pending mark. A crash anywhere in it refuses the call; the order
is charged once or not at all. `Shop` settles a pending order only when it has no charge row;
`DoubleShop` (the planted bug) charges every pending order again, so a crash between the
charge and the clearing of its mark charges that order twice.
"""

from __future__ import annotations

from agents_core import Agent

__all__ = ["DoubleShop", "Shop"]

DDL = (
    "CREATE TABLE IF NOT EXISTS pending (order_id TEXT PRIMARY KEY)",
    "CREATE TABLE IF NOT EXISTS charges (id INTEGER PRIMARY KEY, order_id TEXT)",
)


class Shop(Agent):
    """Charges each order once, whatever call a crash refused."""

    async def charge(self, order: str) -> str:
        for statement in DDL:
            self.sql(statement)
        for row in self.sql("SELECT order_id FROM pending ORDER BY order_id"):
            if self.needs_charge(row["order_id"]):
                self._charge(row["order_id"])
            self.sql("DELETE FROM pending WHERE order_id = ?", row["order_id"])
        self.sql("INSERT OR REPLACE INTO pending (order_id) VALUES (?)", order)
        await self.host.clock.sleep(1_000)  # the payment provider
        self._charge(order)
        await self.host.clock.sleep(100)
        self.sql("DELETE FROM pending WHERE order_id = ?", order)
        return order

    def needs_charge(self, order: str) -> bool:
        return not self.sql("SELECT id FROM charges WHERE order_id = ?", order)

    def _charge(self, order: str) -> None:
        self.sql("INSERT INTO charges (order_id) VALUES (?)", order)
        self.host.trace.emit("shop:charged", order=order)


class DoubleShop(Shop):
    """Charges a pending order again without looking whether it was charged."""

    def needs_charge(self, order: str) -> bool:
        return True
