// placeholder, replaced by the lead
