const results = [];
for (const id of [1, 404, 2]) {
  try {
    const r = await tools.get_order({ id });
    results.push({ id, total: r.details.total });
  } catch (err) {
    results.push({ id, error: err.message });
  }
}
return results;
