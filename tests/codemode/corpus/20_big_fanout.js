// No batching at all: 120 calls at once (more than maxPendingToolCalls).
const ids = Array.from({ length: 120 }, (_, i) => i + 1);
const orders = await Promise.all(ids.map(id => tools.get_order({ id })));
return orders.filter(o => o.details.status === 'paid').length;
