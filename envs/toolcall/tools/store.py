"""An orders-and-inventory store in SQLite: products, customers, orders. Orders take stock when
placed and give it back when cancelled, so the final state records every step the agent took."""
from __future__ import annotations

from envs.toolcall.tools import TODAY, Param, Tool, ToolContext, ToolError

CATEGORIES = ("peripherals", "displays", "audio", "accessories")
STATUSES = ("pending", "shipped", "cancelled")


def _product(ctx: ToolContext, sku: str) -> dict:
    row = ctx.db.execute("SELECT sku, name, category, price, stock FROM products WHERE sku = ?",
                         (sku,)).fetchone()
    if row is None:
        raise ToolError(f"no product with sku {sku!r}")
    return dict(zip(("sku", "name", "category", "price", "stock"), row))


def _where(sql: str, args: list, filters: dict[str, object]) -> tuple[str, list]:
    """`sql` narrowed by each `clause: value` filter whose value was given (None: not filtered)."""
    for clause, value in filters.items():
        if value is not None:
            sql += f" AND {clause}"
            args = [*args, value]
    return sql, args


def search_products(ctx, query: str = "", category: str | None = None, max_price: float | None = None,
                    in_stock_only: bool = False):
    sql, args = _where("SELECT sku FROM products WHERE (name LIKE ? OR sku LIKE ?)", [f"%{query}%", f"%{query}%"],
                       {"category = ?": category, "price <= ?": max_price})
    if in_stock_only:
        sql += " AND stock > 0"
    skus = [r[0] for r in ctx.db.execute(sql + " ORDER BY sku", args)]
    return {"products": [_product(ctx, s) for s in skus]}


def get_product(ctx, sku: str):
    return _product(ctx, sku)


def restock(ctx, sku: str, quantity: int):
    if quantity <= 0:
        raise ToolError("quantity must be a positive integer")
    p = _product(ctx, sku)
    ctx.db.execute("UPDATE products SET stock = stock + ? WHERE sku = ?", (quantity, sku))
    return {"sku": sku, "stock": p["stock"] + quantity}


def set_price(ctx, sku: str, price: float):
    if price <= 0:
        raise ToolError("price must be positive")
    _product(ctx, sku)
    ctx.db.execute("UPDATE products SET price = ? WHERE sku = ?", (round(price, 2), sku))
    return {"sku": sku, "price": round(price, 2)}


def find_customers(ctx, query: str):
    q = f"%{query}%"
    rows = ctx.db.execute("SELECT id, name, email, city FROM customers WHERE name LIKE ? OR email LIKE ? "
                          "OR city LIKE ? ORDER BY id", (q, q, q)).fetchall()
    return {"customers": [dict(zip(("id", "name", "email", "city"), r)) for r in rows]}


def _order(ctx: ToolContext, order_id: int) -> dict:
    row = ctx.db.execute("SELECT id, customer_id, status, created FROM orders WHERE id = ?",
                         (order_id,)).fetchone()
    if row is None:
        raise ToolError(f"no order with id {order_id}")
    items = [dict(zip(("sku", "quantity", "unit_price"), r)) for r in ctx.db.execute(
        "SELECT sku, quantity, unit_price FROM order_items WHERE order_id = ? ORDER BY rowid", (order_id,))]
    total = round(sum(i["quantity"] * i["unit_price"] for i in items), 2)
    return {**dict(zip(("id", "customer_id", "status", "created"), row)), "items": items, "total": total}


def create_order(ctx, customer_id: int, items: list):
    if ctx.db.execute("SELECT 1 FROM customers WHERE id = ?", (customer_id,)).fetchone() is None:
        raise ToolError(f"no customer with id {customer_id}")
    if not items:
        raise ToolError("an order needs at least one item")
    wanted: dict[str, int] = {}
    for item in items:
        if not isinstance(item, dict) or set(item) != {"sku", "quantity"} \
                or not isinstance(item["sku"], str) or type(item["quantity"]) is not int:
            raise ToolError('each item must be {"sku": string, "quantity": integer}')
        if item["quantity"] <= 0:
            raise ToolError("quantities must be positive")
        wanted[item["sku"]] = wanted.get(item["sku"], 0) + item["quantity"]
    for sku, qty in wanted.items():
        p = _product(ctx, sku)
        if p["stock"] < qty:
            raise ToolError(f"not enough stock for {sku}: {p['stock']} available, {qty} requested")
    cur = ctx.db.execute("INSERT INTO orders (customer_id, status, created) VALUES (?, 'pending', ?)",
                         (customer_id, TODAY))
    order_id = cur.lastrowid
    for sku, qty in wanted.items():
        price = _product(ctx, sku)["price"]
        ctx.db.execute("INSERT INTO order_items VALUES (?, ?, ?, ?)", (order_id, sku, qty, price))
        ctx.db.execute("UPDATE products SET stock = stock - ? WHERE sku = ?", (qty, sku))
    return {"order_id": order_id, "total": _order(ctx, order_id)["total"]}


def get_order(ctx, order_id: int):
    return _order(ctx, order_id)


def list_orders(ctx, customer_id: int | None = None, status: str | None = None):
    sql, args = _where("SELECT id FROM orders WHERE 1 = 1", [], {"customer_id = ?": customer_id, "status = ?": status})
    orders = [_order(ctx, r[0]) for r in ctx.db.execute(sql + " ORDER BY id", args)]
    return {"orders": [{k: o[k] for k in ("id", "customer_id", "status", "created", "total")} for o in orders]}


def cancel_order(ctx, order_id: int):
    o = _order(ctx, order_id)
    if o["status"] != "pending":
        raise ToolError(f"order {order_id} is {o['status']}; only pending orders can be cancelled")
    for item in o["items"]:
        ctx.db.execute("UPDATE products SET stock = stock + ? WHERE sku = ?", (item["quantity"], item["sku"]))
    ctx.db.execute("UPDATE orders SET status = 'cancelled' WHERE id = ?", (order_id,))
    return {"order_id": order_id, "status": "cancelled"}


def ship_order(ctx, order_id: int):
    o = _order(ctx, order_id)
    if o["status"] != "pending":
        raise ToolError(f"order {order_id} is {o['status']}; only pending orders can be shipped")
    ctx.db.execute("UPDATE orders SET status = 'shipped' WHERE id = ?", (order_id,))
    return {"order_id": order_id, "status": "shipped"}


_SKU = Param("string", "Product SKU, e.g. 'KB-101'.")
_ORDER = Param("integer", "Order id.")
TOOLS = [
    Tool("search_products", "Search the catalogue by name or SKU substring; optional filters.", {
        "query": Param("string", "Substring of the name or SKU; empty matches all.", required=False),
        "category": Param("string", "Only this category.", required=False, enum=CATEGORIES),
        "max_price": Param("number", "Only products at or below this price.", required=False),
        "in_stock_only": Param("boolean", "Only products with stock > 0.", required=False)},
        search_products),
    Tool("get_product", "One product: name, category, price, stock.", {"sku": _SKU}, get_product),
    Tool("restock", "Add units to a product's stock.", {
        "sku": _SKU, "quantity": Param("integer", "Units to add (positive).")}, restock),
    Tool("set_price", "Change a product's price.", {
        "sku": _SKU, "price": Param("number", "New unit price.")}, set_price),
    Tool("find_customers", "Customers whose name, email or city contains the query.", {
        "query": Param("string", "Substring to look for.")}, find_customers),
    Tool("create_order", "Place a pending order; takes the items from stock at today's prices.", {
        "customer_id": Param("integer", "Customer id."),
        "items": Param("array", "Items to order.", items={
            "type": "object", "properties": {"sku": {"type": "string"}, "quantity": {"type": "integer"}},
            "required": ["sku", "quantity"]})}, create_order),
    Tool("get_order", "One order with its items and total.", {"order_id": _ORDER}, get_order),
    Tool("list_orders", "Orders, optionally of one customer and/or one status, with totals.", {
        "customer_id": Param("integer", "Only this customer's orders.", required=False),
        "status": Param("string", "Only orders with this status.", required=False, enum=STATUSES)},
        list_orders),
    Tool("cancel_order", "Cancel a pending order and return its items to stock.", {"order_id": _ORDER},
         cancel_order),
    Tool("ship_order", "Mark a pending order as shipped.", {"order_id": _ORDER}, ship_order),
]
