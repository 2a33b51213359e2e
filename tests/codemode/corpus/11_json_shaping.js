const { details: users } = await tools.list_users({});
const orders = await Promise.all(users.map(u => tools.get_orders_for({ userId: u.id })));
return users.map((u, i) => ({
  user: u.name,
  orders: orders[i].details.length,
  spent: orders[i].details.reduce((s, o) => s + o.total, 0),
})).sort((a, b) => b.spent - a.spent).slice(0, 3);
