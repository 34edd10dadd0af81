-- Argo CD health of a swivel.dev Reconfiguration (docs/argocd.md).
-- Stale status (observedGeneration < generation) -> Progressing; phase Failed or
-- Failed=True -> Degraded; phase Completed or Succeeded=True -> Healthy; Pending, Queued,
-- Planned, Applying (or no status yet) -> Progressing.
local hs = {}

local function condition(status, kind)
  if status.conditions == nil then
    return nil
  end
  for _, c in ipairs(status.conditions) do
    if c.type == kind then
      return c
    end
  end
  return nil
end

local function describe(c, fallback)
  if c == nil then
    return fallback
  end
  local text = c.reason or fallback
  if c.message ~= nil and c.message ~= "" then
    text = text .. ": " .. c.message
  end
  return text
end

local status = obj.status
local generation = obj.metadata.generation
if status == nil or status.observedGeneration == nil then
  hs.status = "Progressing"
  hs.message = "Waiting for the Swivel operator to observe the reconfiguration"
  return hs
end
if generation ~= nil and status.observedGeneration < generation then
  hs.status = "Progressing"
  hs.message = "Waiting for the operator to observe generation " .. generation
  return hs
end

local phase = status.phase or "Pending"
local failed = condition(status, "Failed")
if phase == "Failed" or (failed ~= nil and failed.status == "True") then
  hs.status = "Degraded"
  hs.message = describe(failed, status.message or "Reconfiguration failed")
  return hs
end

local succeeded = condition(status, "Succeeded")
if phase == "Completed" or (succeeded ~= nil and succeeded.status == "True") then
  hs.status = "Healthy"
  hs.message = describe(succeeded, "Completed")
  return hs
end

hs.status = "Progressing"
if succeeded ~= nil then
  hs.message = describe(succeeded, phase)
else
  hs.message = "Reconfiguration is " .. phase
  if status.message ~= nil and status.message ~= "" then
    hs.message = hs.message .. ": " .. status.message
  end
end
local progress = status.progress
if phase == "Applying" and progress ~= nil and progress.steps ~= nil and progress.steps > 0 then
  hs.message = hs.message .. " (step " .. (progress.step or 0) .. "/" .. progress.steps .. ")"
end
return hs
