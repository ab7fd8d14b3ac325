package api

import "net/http"

// UpdateRequest changes a submitted sweep (gpuq update).
type UpdateRequest struct {
	Sweep string `json:"sweep"`
	// MaxRunning is the most of its jobs that run at once; 0: no limit.
	MaxRunning int `json:"max_running"`
}

// UpdateResponse is the sweep as updated: what it runs now under its new limit.
type UpdateResponse struct {
	Sweep      string `json:"sweep"`
	MaxRunning int    `json:"max_running"`
	Running    int    `json:"running"`
	// Waiting counts its jobs queued (held or not): none left to start, the limit
	// changes nothing now. nil from a daemon before it was told.
	Waiting *int `json:"waiting,omitempty"`
}

// Update changes a submitted sweep.
func (c *Client) Update(req UpdateRequest) (UpdateResponse, error) {
	var out UpdateResponse
	return out, c.call(http.MethodPost, "/v1/update", req, &out)
}
