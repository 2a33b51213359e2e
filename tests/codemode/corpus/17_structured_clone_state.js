const state = { seen: new Set(), history: [] };
for (const city of ['Oslo', 'Oslo', 'Perth']) {
  const snapshot = structuredClone(state);
  if (!state.seen.has(city)) {
    state.seen.add(city);
    state.history.push((await tools.get_weather({ city })).details.summary);
  }
  console.log(`${city}: seen before=${snapshot.seen.has(city)}`);
}
return state.history;
