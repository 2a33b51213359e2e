// Each step depends on the one before.
const { details: users } = await tools.list_users({});
const top = users.find(u => u.team === 'core' && u.active);
const orders = (await tools.get_orders_for({ userId: top.id })).details;
const biggest = orders.reduce((a, b) => (b.total > a.total ? b : a));
const detail = await tools.get_order({ id: biggest.id });
return `${top.name} spent most on order ${detail.details.id} (${detail.details.total})`;
