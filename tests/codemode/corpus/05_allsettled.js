const ids = [1, 2, 404];
const settled = await Promise.allSettled(ids.map(id => tools.get_order({ id })));
return settled.map((s, i) => s.status === 'fulfilled'
  ? { id: ids[i], ok: true, total: s.value.details.total }
  : { id: ids[i], ok: false, reason: s.reason.message });
