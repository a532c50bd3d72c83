// Package pagedfake is controller-runtime's fake client serving lists as the API server does, a page
// of at most Limit items at a time with a continue token (the fake client ignores both): for the tests
// of what must read a large cluster page by page.
package pagedfake

import (
	"context"
	"fmt"
	"strconv"

	apimeta "k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/client/fake"
	"sigs.k8s.io/controller-runtime/pkg/client/interceptor"
)

// New is a reader of objs, and the list requests it served by list type (%T of the list).
func New(objs ...client.Object) (client.Reader, map[string]int) {
	requests := map[string]int{}
	c := fake.NewClientBuilder().WithObjects(objs...).WithInterceptorFuncs(interceptor.Funcs{
		List: func(ctx context.Context, c client.WithWatch, list client.ObjectList, opts ...client.ListOption) error {
			lo := (&client.ListOptions{}).ApplyOptions(opts)
			requests[fmt.Sprintf("%T", list)]++
			if err := c.List(ctx, list, opts...); err != nil || lo.Limit == 0 {
				return err
			}
			items, err := apimeta.ExtractList(list)
			if err != nil {
				return err
			}
			from := 0
			if lo.Continue != "" {
				if from, err = strconv.Atoi(lo.Continue); err != nil {
					return err
				}
			}
			to := min(from+int(lo.Limit), len(items))
			if to < len(items) {
				list.(metav1.ListInterface).SetContinue(strconv.Itoa(to))
			}
			return apimeta.SetList(list, items[from:to])
		}}).Build()
	return c, requests
}
